"""Baseline vs ELMo: a Markdown table and a PNG chart from `spacy evaluate` JSON files.

Reads `<metrics_dir>/{ud,ner}_{baseline,elmo}.json` (whichever pairs exist) and,
optionally, the pretraining log (`metrics.jsonl` of `python -m spacy_elmo
pretrain`). Writes `compare.md` (per task and metric: baseline, ELMo, difference;
plus the final held-out perplexity) and `compare.png` (bars per metric, and the
pretraining perplexity curve).
"""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import typer
from wasabi import msg

from spacy_elmo.figures import agg_pyplot, save_figure

from spacy_elmo.output_files import atomic_output_path

# (task file prefix, task name, [(score key, label)]): the keys `spacy evaluate` writes.
TASKS: List[Tuple[str, str, List[Tuple[str, str]]]] = [
    ("ud", "UD English-EWT", [
        ("pos_acc", "UPOS"), ("tag_acc", "XPOS"), ("morph_acc", "Morph"),
        ("dep_uas", "UAS"), ("dep_las", "LAS"),
    ]),
    ("ner", "NER", [("ents_p", "NER P"), ("ents_r", "NER R"), ("ents_f", "NER F")]),
]
SYSTEMS = ("baseline", "elmo")

Row = Dict[str, Any]


def read_json(path: Path) -> Dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf8"))
    except (OSError, json.JSONDecodeError) as err:
        msg.fail(f"Cannot read metrics file {path}: {err}", exits=1)
        raise  # unreachable; keeps type checkers happy


def collect_rows(metrics_dir: Path) -> List[Row]:
    """One row per (task, metric) that both systems report."""
    rows: List[Row] = []
    for prefix, task, metrics in TASKS:
        paths = {system: metrics_dir / f"{prefix}_{system}.json" for system in SYSTEMS}
        if not all(path.exists() for path in paths.values()):
            continue
        scores = {system: read_json(path) for system, path in paths.items()}
        for key, label in metrics:
            values = [scores[system].get(key) for system in SYSTEMS]
            if all(isinstance(v, (int, float)) for v in values):
                rows.append({"task": task, "metric": label, "key": key, "baseline": values[0], "elmo": values[1]})
        speeds = [scores[system].get("speed") for system in SYSTEMS]
        if all(isinstance(v, (int, float)) for v in speeds):
            rows.append({"task": task, "metric": "words/s", "key": "speed", "baseline": speeds[0], "elmo": speeds[1]})
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


def markdown_table(rows: List[Row], dev_log: List[Row], title: str) -> str:
    lines = [f"## {title}", ""]
    if rows:
        lines += ["| Task | Metric | Baseline (CNN tok2vec) | ELMo | Δ |", "|---|---|---:|---:|---:|"]
        for row in rows:
            if row["key"] == "speed":
                delta = f"{row['elmo'] / row['baseline']:.2f}×" if row["baseline"] else "n/a"
            else:
                delta = f"{100 * (row['elmo'] - row['baseline']):+.2f}"
            lines.append(
                f"| {row['task']} | {row['metric']} | {format_value(row['key'], row['baseline'])} "
                f"| {format_value(row['key'], row['elmo'])} | {delta} |"
            )
        lines += ["", "Scores are percentages on the dev set (`spacy evaluate --gold-preproc`: gold tokens and sentences); Δ = ELMo − baseline."]
    else:
        lines.append("No metrics pairs found.")
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
    pyplot = agg_pyplot()
    scored = [row for row in rows if row["key"] != "speed"]
    figure, (bars, curve) = pyplot.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    width = 0.38
    positions = list(range(len(scored)))
    for offset, system, label in ((-width / 2, "baseline", "baseline (CNN tok2vec)"), (width / 2, "elmo", "ELMo")):
        values = [100 * row[system] for row in scored]
        drawn = bars.bar([p + offset for p in positions], values, width, label=label)
        bars.bar_label(drawn, fmt="%.1f", fontsize=7, padding=2)
    bars.set_xticks(positions)
    bars.set_xticklabels([row["metric"] for row in scored])
    bars.set_ylabel("dev score (%)")
    bars.set_ylim(0, 115)
    bars.set_title(f"Baseline vs ELMo: {title}")
    bars.legend(loc="upper center", ncols=2)
    bars.grid(True, axis="y", alpha=0.3)
    if train_log or dev_log:
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
    else:
        curve.axis("off")
        curve.text(0.5, 0.5, "no pretraining log\n(a given biLM was used)", ha="center", va="center")
    figure.tight_layout()
    save_figure(figure, path, dpi=100)


def main(
    metrics_dir: Path = typer.Argument(..., help="Directory with {ud,ner}_{baseline,elmo}.json"),
    pretrain_log: Optional[Path] = typer.Option(None, "--pretrain-log", help="metrics.jsonl of the pretraining run"),
    title: str = typer.Option("dev set", "--title", help="Names the data in the table and chart"),
) -> None:
    rows = collect_rows(metrics_dir)
    if not rows:
        msg.fail(
            f"No baseline/ELMo metrics pairs in {metrics_dir} (expected ud_baseline.json + ud_elmo.json "
            "and/or ner_baseline.json + ner_elmo.json): run the evaluate step first",
            exits=1,
        )
    train_log, dev_log = read_pretraining_log(pretrain_log)
    table = markdown_table(rows, dev_log, title)
    table_path = metrics_dir / "compare.md"
    with atomic_output_path(table_path) as tmp:
        tmp.write_text(table, encoding="utf8")
    draw_chart(rows, train_log, dev_log, metrics_dir / "compare.png", title)
    print(table)
    msg.good(f"Wrote {table_path} and {metrics_dir / 'compare.png'}")


if __name__ == "__main__":
    typer.run(main)
