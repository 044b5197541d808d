"""The metrics log (a run's `metrics.jsonl`) and its perplexity plot."""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from ..figures import agg_pyplot, save_figure
from ..output_files import atomic_output_path, check_replaceable


class MetricsLog:
    """Appends one JSON object per line: ``kind`` "train" (running averages) or "dev" (held-out)."""

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = Path(path)

    def append(self, record: Dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf8") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")

    def read(self) -> List[Dict[str, Any]]:
        """The records of a step each; a line that is none (cut short by a crash, damaged) is skipped."""
        if not self.path.is_file():
            return []
        records = []
        for line in self.path.read_bytes().decode("utf8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(record, dict) and type(record.get("step")) is int:  # not a bool, a float, NaN
                records.append(record)
        return records

    def truncate_after(self, step: int) -> None:
        """Drop records after `step` (a resumed run repeats the steps after its checkpoint)."""
        check_replaceable(self.path, what="The metrics log", fix="move it out of the run's directory")
        kept = [r for r in self.read() if r["step"] <= step]
        with atomic_output_path(self.path) as tmp:
            tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in kept), encoding="utf8")


def plot_perplexity(
    records: List[Dict[str, Any]], path: Union[str, Path], *, sampled: bool, unigram: Optional[float] = None
) -> None:
    """Plot training and held-out perplexity against steps (and the held-out unigram
    baseline when given)."""
    pyplot = agg_pyplot()
    train = [r for r in records if r.get("kind") == "train"]
    dev = [r for r in records if r.get("kind") == "dev"]
    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    label = "training (sampled softmax)" if sampled else "training"
    if train:
        axes.plot([r["step"] for r in train], [r["train_perplexity"] for r in train], label=label, alpha=0.8)
    for key, style, name in (
        ("dev_perplexity", "o-", "held-out, average"),
        ("dev_perplexity_forward", "--", "held-out, forward"),
        ("dev_perplexity_backward", ":", "held-out, backward"),
    ):
        if dev:
            axes.plot([r["step"] for r in dev], [r[key] for r in dev], style, label=name)
    if unigram is not None:
        axes.axhline(unigram, color="grey", linewidth=1, linestyle="-.", label=f"held-out, unigram ({unigram:.0f})")
    axes.set_yscale("log")
    axes.set_xlabel("step")
    axes.set_ylabel("perplexity")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    save_figure(figure, path, dpi=100)
