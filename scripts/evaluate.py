"""Evaluate pipelines on one dev set, as `spacy evaluate` does, in one process.

For each PIPELINE (a `training/<scale>/<name>/model-best` directory) writes
`<metrics_dir>/<name>.json` (raw text: spaCy's tokenizer and the pipeline's own sentences,
as `nlp(text)` runs; words/s included) and `<metrics_dir>/<name>_sentences.json` (the
corpus' words, one sentence per Doc: `--gold-preproc`). The scores are spaCy's own
`evaluate` (the function behind `spacy evaluate`): the same files as eight commands
would write, without paying the start of Python, spaCy and torch for each.

    python scripts/evaluate.py corpus/sample/ud/dev.spacy metrics/sample training/sample/ud_*/model-best
"""
from pathlib import Path
from typing import List

import typer
from wasabi import msg


def output_name(pipeline: Path) -> str:
    """`training/sample/ud_elmo/model-best` -> `ud_elmo`: the training run's directory."""
    return (pipeline.parent if pipeline.name in ("model-best", "model-last") else pipeline).name


def main(
    data: Path = typer.Argument(..., help="The dev set (.spacy)", exists=True, dir_okay=False),
    metrics_dir: Path = typer.Argument(..., help="Where NAME.json and NAME_sentences.json go"),
    pipelines: List[Path] = typer.Argument(..., help="Pipeline directories (training/<scale>/<name>/model-best)"),
    gpu_id: int = typer.Option(-1, "--gpu-id", help="GPU to use (-1: CPU)"),
) -> None:
    from spacy.cli.evaluate import evaluate
    names = [output_name(pipeline) for pipeline in pipelines]
    if len(set(names)) != len(names):
        msg.fail(f"Two pipelines would write the same metrics file: {', '.join(names)}", exits=1)
    missing = [str(pipeline) for pipeline in pipelines if not pipeline.is_dir()]
    if missing:
        msg.fail(f"Pipeline not found: {', '.join(missing)}", exits=1)
    metrics_dir.mkdir(parents=True, exist_ok=True)
    for pipeline, name in zip(pipelines, names):
        for gold_preproc, suffix in ((False, ""), (True, "_sentences")):
            output = metrics_dir / f"{name}{suffix}.json"
            evaluate(str(pipeline), data, output=output, use_gpu=gpu_id, gold_preproc=gold_preproc, silent=True)
            msg.good(f"{pipeline}{' (one sentence per Doc)' if gold_preproc else ''}: {output}")


if __name__ == "__main__":
    typer.run(main)
