"""The pipelines side by side: a Markdown table and a PNG chart from `spacy evaluate` JSON files.

Reads `<metrics_dir>/{ud,ner}_{baseline,vectors,elmo,elmo_vectors}.json` (the baseline and
whichever others exist: `spacy evaluate` on the dev set's raw text, as a user runs a pipeline),
beside them `*_sentences.json` where present (`spacy evaluate --gold-preproc`: the corpus' own
words, one sentence per Doc) and, optionally, the pretraining log (`metrics.jsonl` of `python -m
spacy_elmo pretrain`). Writes `compare.md` (per task and metric: each pipeline's score and its
difference from the baseline; words/s and the seconds each 1,000 words cost; the final held-out
perplexity) and `compare.png` (per task, each pipeline as a point of its main score against its
speed: the cost/benefit frontier to choose from; and the pretraining perplexity curve).

Given several metrics directories (one per seed, each with the same files), every score is the
mean over them, words/s the median, and the table adds the main score of each run.
"""
import json
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import typer
from wasabi import msg

from spacy_elmo.figures import agg_pyplot, save_figure

from spacy_elmo.output_files import atomic_output_path

# (task file prefix, task name, [(score key, label)], the main score's key): keys of `spacy evaluate`.
TASKS: List[Tuple[str, str, List[Tuple[str, str]], str]] = [
    ("ud", "UD", [
        ("pos_acc", "UPOS"), ("tag_acc", "XPOS"), ("morph_acc", "Morph"),
        ("dep_uas", "UAS"), ("dep_las", "LAS"),
    ], "dep_las"),
    ("ner", "NER", [("ents_p", "NER P"), ("ents_r", "NER R"), ("ents_f", "NER F")], "ents_f"),
]
# (file suffix, column label), the baseline first: every difference is taken from it.
SYSTEMS: List[Tuple[str, str]] = [
    ("baseline", "baseline (CNN)"), ("vectors", "+ vectors"), ("elmo", "+ ELMo"), ("elmo_vectors", "+ ELMo + vectors"),
]

Row = Dict[str, Any]


def read_json(path: Path) -> Dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except (OSError, json.JSONDecodeError) as err:
        msg.fail(f"Cannot read metrics file {path}: {err}", exits=1)
        raise  # unreachable; keeps type checkers happy


def collect_rows(metrics_dirs: Sequence[Path]) -> List[Row]:
    """One row per (task, metric) with the score of each pipeline evaluated for the task
    (``row["scores"]``: system -> the mean over the directories, words/s their median;
    ``row["runs"]``: system -> each directory's value), when the baseline and at least one other
    were."""
    rows: List[Row] = []
    for prefix, task, metrics, main_key in TASKS:
        paths = {system: [d / f"{prefix}_{system}.json" for d in metrics_dirs] for system, _ in SYSTEMS}
        absent = {system: [path for path in files if not path.exists()] for system, files in paths.items()}
        present = [system for system in paths if len(absent[system]) < len(metrics_dirs)]
        if "baseline" not in present or len(present) < 2:
            continue
        for system in present:
            if absent[system]:
                msg.fail(f"Missing metrics file {absent[system][0]}: every directory needs the same pipelines", exits=1)
        results = {system: [read_json(path) for path in paths[system]] for system in present}
        sentences = {system: [path.with_name(f"{path.stem}_sentences.json") for path in paths[system]] for system in present}
        if all(path.exists() for files in sentences.values() for path in files):
            label = dict(metrics)[main_key]
            metrics = [*metrics, (f"sentences:{main_key}", f"{label}, gold sentences")]
            for system in present:
                for result, path in zip(results[system], sentences[system]):
                    result[f"sentences:{main_key}"] = read_json(path).get(main_key)
        for key, label in [*metrics, ("speed", "words/s")]:
            runs = {system: [result.get(key) for result in results[system]] for system in present}
            if all(isinstance(v, (int, float)) for values in runs.values() for v in values):
                average = statistics.median if key == "speed" else statistics.fmean
                rows.append({
                    "task": task, "metric": label, "key": key, "main": key == main_key, "runs": runs,
                    "scores": {system: average(values) for system, values in runs.items()},
                })
    return rows


def read_pretraining_log(path: Optional[Path]) -> Tuple[List[Row], List[Row]]:
    """(training records, held-out records) of a `metrics.jsonl`; lines cut short are skipped."""
    if path is None or not path.exists():
        return [], []
    train, dev = [], []
    for line in path.read_text(encoding="utf8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("kind") == "train" and "train_perplexity" in record:
            train.append(record)
        elif record.get("kind") == "dev" and "dev_perplexity" in record:
            dev.append(record)
    return train, dev


def format_value(key: str, value: float) -> str:
    return f"{value:,.0f}" if key == "speed" else f"{100 * value:.2f}"


def _cell(row: Row, system: str) -> str:
    value, base = row["scores"].get(system), row["scores"]["baseline"]
    if value is None:
        return "–"
    if system == "baseline":
        return format_value(row["key"], value)
    if row["key"] == "speed":
        return f"{value:,.0f} ({value / base:.2f}×)" if base else f"{value:,.0f}"
    return f"{format_value(row['key'], value)} ({100 * (value - base):+.2f})"


def markdown_table(rows: List[Row], dev_log: List[Row], title: str) -> str:
    lines = [f"## {title}", ""]
    if rows:
        systems = [(system, label) for system, label in SYSTEMS if any(system in row["scores"] for row in rows)]
        n_runs = len(next(iter(rows[0]["runs"].values())))
        lines += ["| Task | Metric | " + " | ".join(label for _, label in systems) + " |",
                  "|---|---|" + "---:|" * len(systems)]
        for row in rows:
            lines.append(f"| {row['task']} | {row['metric']} | " + " | ".join(_cell(row, s) for s, _ in systems) + " |")
            if row["main"] and n_runs > 1:
                runs = [" / ".join(format_value(row["key"], v) for v in row["runs"][s]) if s in row["runs"] else "–"
                        for s, _ in systems]
                lines.append(f"| {row['task']} | {row['metric']}, each run | " + " | ".join(runs) + " |")
            if row["key"] == "speed":
                costs = [f"{1000 / row['scores'][s]:.3f} s" if row["scores"].get(s) else "–" for s, _ in systems]
                lines.append(f"| {row['task']} | s per 1,000 words | " + " | ".join(costs) + " |")
        averaged = f" Means of {n_runs} runs (words/s: the median)." if n_runs > 1 else ""
        lines += ["", "Scores are percentages on the dev set's raw text (`spacy evaluate`: spaCy's tokenizer and "
                  "the pipeline's own sentences, as `nlp(text)` runs); \"gold sentences\" rows give the same "
                  "pipelines on the corpus' words, one sentence per Doc (`--gold-preproc`). In parentheses the "
                  "difference from the baseline; words/s as `spacy evaluate` measures it (raw text), on this "
                  f"machine.{averaged}"]
    else:
        lines.append("No metrics found.")
    if dev_log:
        last = dev_log[-1]
        parts = [f"{last['dev_perplexity']:.1f} (average)"]
        for direction in ("forward", "backward"):
            value = last.get(f"dev_perplexity_{direction}")
            if isinstance(value, (int, float)):
                parts.append(f"{value:.1f} ({direction})")
        first = dev_log[0]
        start = f", from {first['dev_perplexity']:.1f} at step {first['step']}" if len(dev_log) > 1 else ""
        lines += ["", f"biLM held-out perplexity at step {last['step']}: {', '.join(parts)}{start}."]
    return "\n".join(lines) + "\n"


def draw_chart(rows: List[Row], train_log: List[Row], dev_log: List[Row], path: Path, title: str) -> None:
    """Per task, each pipeline's main score against its words/s; then the pretraining curve, if any."""
    pyplot = agg_pyplot()
    tasks = [task for _, task, _, _ in TASKS if any(row["task"] == task for row in rows)]
    has_log = bool(train_log or dev_log)
    n_panels = len(tasks) + has_log
    figure, axes = pyplot.subplots(1, n_panels, figsize=(5.2 * n_panels, 4.6), squeeze=False)
    axes = list(axes[0])
    labels = dict(SYSTEMS)
    for axis, task in zip(axes, tasks):
        main = next((row for row in rows if row["task"] == task and row["main"]), None)
        speed = next((row for row in rows if row["task"] == task and row["key"] == "speed"), None)
        if main is None or speed is None:
            axis.axis("off")
            continue
        for index, (system, _) in enumerate(SYSTEMS):  # one colour per pipeline in every panel
            if system in main["scores"]:
                x, y = speed["scores"][system], 100 * main["scores"][system]
                axis.scatter([x], [y], s=70, color=f"C{index}", label=f"{labels[system]}: {y:.1f}, {x:,.0f} words/s")
        axis.legend(fontsize=8, loc="best")
        axis.set_xscale("log")
        axis.set_xlabel("words/s (spacy evaluate, log scale)")
        axis.set_ylabel(f"dev {main['metric']} (%)")
        axis.set_title(f"{task}: accuracy against speed")
        axis.grid(True, which="both", alpha=0.3)
        axis.margins(x=0.3, y=0.3)
    if has_log:
        curve = axes[-1]
        if train_log:
            curve.plot([r["step"] for r in train_log], [r["train_perplexity"] for r in train_log], label="training", alpha=0.8)
        if dev_log:
            curve.plot([r["step"] for r in dev_log], [r["dev_perplexity"] for r in dev_log], "o-", label="held-out (avg. of both directions)")
        curve.set_yscale("log")
        curve.set_xlabel("step")
        curve.set_ylabel("perplexity")
        curve.legend()
        curve.grid(True, which="both", alpha=0.3)
        curve.set_title("biLM pretraining")
    figure.suptitle(title)
    figure.tight_layout()
    save_figure(figure, path, dpi=100)


def main(
    metrics_dirs: List[Path] = typer.Argument(..., help="Directories with {ud,ner}_{baseline,vectors,elmo,elmo_vectors}.json: one, or one per seed"),
    pretrain_log: Optional[Path] = typer.Option(None, "--pretrain-log", help="metrics.jsonl of the pretraining run"),
    title: str = typer.Option("dev set", "--title", help="Names the data in the table and chart"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Where compare.md and compare.png go (default: the first metrics directory)", file_okay=False),
) -> None:
    rows = collect_rows(metrics_dirs)
    if not rows:
        msg.fail(
            f"No metrics to compare in {', '.join(map(str, metrics_dirs))} (expected ud_baseline.json or "
            "ner_baseline.json and at least one of *_vectors.json, *_elmo.json, *_elmo_vectors.json): run "
            "the evaluate step first",
            exits=1,
        )
    train_log, dev_log = read_pretraining_log(pretrain_log)
    table = markdown_table(rows, dev_log, title)
    output_dir = output or metrics_dirs[0]  # atomic_output_path creates it
    table_path, chart_path = output_dir / "compare.md", output_dir / "compare.png"
    with atomic_output_path(table_path) as tmp:
        tmp.write_text(table, encoding="utf8")
    draw_chart(rows, train_log, dev_log, chart_path, title)
    print(table)
    msg.good(f"Wrote {table_path} and {chart_path}")


if __name__ == "__main__":
    typer.run(main)
