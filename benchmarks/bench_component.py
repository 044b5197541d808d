"""Throughput of the `elmo` pipeline component and of a whole ELMo pipeline on CPU.

Component: `nlp.pipe` over UD English-EWT dev sentences (spaCy's English
tokenizer, natural order), with the shipped `english-compact` biLM (or a named
model, or a randomly initialised biLM of a named `--size`); median of the repeats
after one warm-up pass. "warm" repeats keep the token-vector cache filled by the
warm-up, as a long `nlp.pipe` stream does; "cold" empties it before each repeat.
`--sentences-per-text N` joins N sentences into each text (running text, as users
give it), so the component's own sentence search is timed too; `--setting
model.get_spans.@misc=spacy-elmo.doc_spans.v1` reads such texts in windows instead.

Pipelines: `--pipeline DIR` (a trained pipeline with ELMo, e.g. from
`configs/ner_elmo.cfg`) and `--baseline-pipeline DIR` (the same without ELMo) over
the sentences of a `.spacy` file as Docs with their words (as `spacy evaluate --gold-preproc`);
prints words/s and ELMo's added seconds per 1,000 words, each pipeline timed in its own process.

Uses only the public spaCy API and component settings, so the same script times
any version of spacy-elmo (PYTHONPATH=that checkout); `--setting` passes component
settings such as `token_cache_size=0` or `precision=bf16`.

    flock /tmp/spacy-elmo-heavy.lock python benchmarks/bench_component.py --batch-sizes 1 32
    flock /tmp/spacy-elmo-heavy.lock python benchmarks/bench_component.py --skip-component \\
        --pipeline ner_elmo/model-best --baseline-pipeline ner_base/model-best --docs ner_dev.spacy
"""
import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

DEFAULT_CONLLU = Path(__file__).resolve().parents[2] / "shared/data/ud_english_ewt/en_ewt-ud-dev.conllu"


def read_texts(path: Path, n: int, seed: int) -> List[str]:
    """`n` sentence texts (the `# text =` lines) drawn at random from a CoNLL-U file."""
    texts = [line[len("# text = "):] for line in path.read_text(encoding="utf8").splitlines() if line.startswith("# text = ")]
    return random.Random(seed).sample(texts, n)


def parse_settings(pairs: List[str]) -> Dict[str, Any]:
    """`key=value` pairs as a nested dict (`model.batch_size=64`), values read as
    JSON where they parse (numbers, true, null)."""
    settings: Dict[str, Any] = {}
    for pair in pairs:
        key, _, text = pair.partition("=")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        *sections, name = key.split(".")
        section = settings
        for part in sections:
            section = section.setdefault(part, {})
        section[name] = value
    return settings


def median_seconds(run: Callable[[], None], repeats: int, before_each: Callable[[], None] = lambda: None) -> float:
    seconds = []
    for _ in range(repeats):
        before_each()
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def empty_token_cache(nlp) -> None:
    """Empty the component's token-vector cache, in versions that have one (on the
    component, or in earlier versions in its model's attrs)."""
    elmo = nlp.get_pipe("elmo")
    cache = getattr(elmo, "token_cache", None)
    if cache is None:
        cache = elmo.model.attrs.get("token_cache")
    if cache is not None:
        cache.clear()


def bench_component(args: argparse.Namespace) -> None:
    import spacy

    nlp = spacy.blank("en")
    config = parse_settings(args.setting)
    model = config.setdefault("model", {})
    if args.size is not None:
        model["size"] = args.size
        label = f"random {args.size}"
    else:
        model["weights_loader"] = {"@misc": "spacy-elmo.elmo_weights.v1", "model": args.model}
        label = args.model
    nlp.add_pipe("elmo", config=config)
    nlp.initialize()
    sentences = read_texts(args.conllu, args.n_sentences, seed=0)
    n = args.sentences_per_text
    texts = [" ".join(sentences[i : i + n]) for i in range(0, len(sentences), n)]
    n_tokens = sum(len(doc) for doc in nlp.tokenizer.pipe(texts))
    extra = " ".join(args.setting)
    for batch_size in args.batch_sizes:
        def run() -> None:
            for _doc in nlp.pipe(texts, batch_size=batch_size):
                pass

        run()  # warm-up
        for cache in ("warm", "cold"):
            before = (lambda: None) if cache == "warm" else (lambda: empty_token_cache(nlp))
            median = median_seconds(run, args.repeats, before)
            print(
                f"elmo component, {label} {extra}, {n} sentences a text, nlp.pipe batch_size {batch_size}, {cache}: "
                f"{n_tokens} tokens, "
                f"median {median:.3f} s of {args.repeats} -> {n_tokens / median:,.0f} tokens/s",
                flush=True,
            )


def gold_preproc(vocab, reference) -> list:
    """As `spacy evaluate --gold-preproc`: one Doc per reference sentence, with its
    words and spaces and nothing else."""
    from spacy.tokens import Doc

    sentences = [sent.as_doc() for sent in reference.sents] if reference.has_annotation("SENT_START") else [reference]
    return [Doc(vocab, words=[t.text for t in s], spaces=[bool(t.whitespace_) for t in s]) for s in sentences]


def time_pipeline(args: argparse.Namespace, path: Path, with_elmo: bool) -> float:
    """Words/s of one pipeline over the gold-preproc sentences of ``args.docs`` (printed too);
    ``--setting`` goes to the `elmo` component of the pipeline `with_elmo`."""
    import spacy
    from spacy.tokens import DocBin

    name = "with ELMo" if with_elmo else "baseline"
    settings = parse_settings(args.setting)
    overrides = {"components": {"elmo": settings}} if settings and with_elmo else {}
    nlp = spacy.load(path, config=overrides)
    reference = list(DocBin().from_disk(args.docs).get_docs(nlp.vocab))[: args.n_docs]
    n_words = sum(len(doc) for doc in reference)

    def run() -> None:
        docs = (doc for ref in reference for doc in gold_preproc(nlp.vocab, ref))
        for _doc in nlp.pipe(docs, batch_size=args.pipeline_batch_size):
            pass

    run()  # warm-up: as `spacy evaluate`, one pass fills the token-vector cache
    median = median_seconds(run, args.repeats)
    print(
        f"pipeline {path} ({name}, {' '.join(args.setting)}): {len(reference)} reference Docs, {n_words} words, "
        f"median {median:.2f} s of {args.repeats} -> {n_words / median:,.0f} words/s",
        flush=True,
    )
    return n_words / median


def bench_pipelines(args: argparse.Namespace) -> None:
    """Each pipeline in its own process: a pipeline timed in the process that has just run
    another one ran up to 1.3x slower (measured on a Zen 3 with a NER pipeline)."""
    words_per_s = {}
    for name, flag, path in (
        ("with ELMo", "--pipeline", args.pipeline), ("baseline", "--baseline-pipeline", args.baseline_pipeline)
    ):
        if path is None:
            continue
        command = [
            sys.executable, __file__, "--skip-component", flag, str(path), "--docs", str(args.docs),
            "--repeats", str(args.repeats), "--n-docs", str(args.n_docs),
            "--pipeline-batch-size", str(args.pipeline_batch_size), "--one-pipeline", "--setting", *args.setting,
        ]
        # stdout only: a failing process's error reaches the terminal.
        result = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        if result.returncode != 0:
            sys.exit(f"{flag} {path}: the timing process failed (its error is above)")
        lines = result.stdout.splitlines()
        print(lines[0], flush=True)
        words_per_s[name] = float(lines[-1])
    if len(words_per_s) == 2:
        added = 1000 / words_per_s["with ELMo"] - 1000 / words_per_s["baseline"]
        print(f"ELMo's added cost: {added:.4f} s per 1,000 words", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="english-compact", help="a model name or directory (weights loaded)")
    parser.add_argument("--size", default=None, choices=["tiny", "compact", "small", "medium", "original"],
                        help="a randomly initialised biLM of this size instead of --model")
    parser.add_argument("--setting", nargs="*", default=[], help="component settings, key=value")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--n-sentences", type=int, default=256)
    parser.add_argument("--sentences-per-text", type=int, default=1, help="sentences joined into one text")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--conllu", type=Path, default=DEFAULT_CONLLU)
    parser.add_argument("--skip-component", action="store_true")
    parser.add_argument("--pipeline", type=Path, default=None, help="a trained pipeline with ELMo")
    parser.add_argument("--baseline-pipeline", type=Path, default=None, help="the same pipeline without ELMo")
    parser.add_argument("--docs", type=Path, default=None, help=".spacy file the pipelines run over")
    parser.add_argument("--n-docs", type=int, default=100_000)
    parser.add_argument("--pipeline-batch-size", type=int, default=256)
    parser.add_argument("--one-pipeline", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    import torch

    torch.manual_seed(0)
    if not args.skip_component:
        bench_component(args)
    if args.pipeline is not None or args.baseline_pipeline is not None:
        if args.docs is None:
            parser.error("--pipeline needs --docs")
        if args.one_pipeline:  # one of bench_pipelines' processes: its words/s on the last line
            with_elmo = args.pipeline is not None
            print(time_pipeline(args, args.pipeline if with_elmo else args.baseline_pipeline, with_elmo))
        else:
            bench_pipelines(args)


if __name__ == "__main__":
    main()
