"""Wall time of a whole `spacy_elmo pretrain` process, optionally side by side with another checkout.

`--settings main-job` (the default, the issue-12 measurement): the old main job's pretraining
settings (`tiny` size with LSTM 2x128 and projection 32, 10k-word full softmax, Adam, 8,192
tokens per step, spaCy `en` tokenizer with sentence splitting). `--settings english`: the
shipped English biLM's own config (`configs/pretrain_english.cfg`: `compact` size, sampled
softmax with 4,096 negatives, 4,096 tokens per step). Either for 16 steps on the first 6,000
lines of the embedded public-domain sample. Each round runs every checkout once, alternating,
in a fresh output directory; the figures are the medians over the rounds, and the last
training loss of each run shows that the checkouts compute the same thing.

    flock /tmp/spacy-elmo-heavy.lock python benchmarks/bench_pretrain_process.py \\
        --other /path/to/old/checkout --rounds 3 [--settings english]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
NO_EVALUATION = [
    "--training.eval_every", "1000", "--training.checkpoint_every", "1000", "--training.log_every", "4",
]
# name: (config in configs/, settings that override it)
SETTINGS = {
    "main-job": ("pretrain_small.cfg", [
        "--corpus.tokenizer", "en", "--corpus.split_sentences", "true", "--vocab.size", "10000",
        "--model.size", "tiny", "--model.lstm_dim", "128", "--model.projection_dim", "32",
        "--optimizer.name", "adam", "--optimizer.learn_rate", "0.004",
        "--training.tokens_per_step", "8192", *NO_EVALUATION,
    ]),
    "english": ("pretrain_english.cfg", ["--training.eval_at_start", "false", *NO_EVALUATION]),
}


def run_once(checkout: Path, settings: str, train: Path, output_dir: Path, steps: int) -> Dict[str, float]:
    """One pretraining process from `checkout`: its wall time, last training loss and
    training speed (median tokens/s of its logged intervals after the first, which
    holds the warm-up)."""
    config, overrides = SETTINGS[settings]
    command = [
        sys.executable, "-m", "spacy_elmo", "pretrain", str(checkout / "configs" / config),
        str(output_dir), "--paths.train", str(train), "--training.max_steps", str(steps), *overrides,
    ]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=checkout)
    seconds = time.perf_counter() - start
    with (output_dir / "metrics.jsonl").open(encoding="utf8") as handle:
        train = [record for record in map(json.loads, handle) if record.get("kind") == "train"]
    speeds = [record["tokens_per_second"] for record in train[1:]] or [train[-1]["tokens_per_second"]]
    return {
        "seconds": seconds, "loss": train[-1]["train_loss"], "step": train[-1]["step"],
        "tokens_per_second": statistics.median(speeds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--other", type=Path, default=None, help="another checkout to time beside this one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--lines", type=int, default=6000, help="lines of the embedded sample to train on")
    parser.add_argument("--settings", choices=sorted(SETTINGS), default="main-job", help="which pretraining settings")
    args = parser.parse_args()
    checkouts: List[Path] = [ROOT] + ([args.other.resolve()] if args.other else [])
    times: Dict[Path, List[float]] = {checkout: [] for checkout in checkouts}
    speeds: Dict[Path, List[float]] = {checkout: [] for checkout in checkouts}
    losses: Dict[Path, Optional[float]] = {checkout: None for checkout in checkouts}
    sample = ROOT / "assets" / "raw_text" / "sample_public_domain.txt"
    with tempfile.TemporaryDirectory() as tmp:
        train = Path(tmp) / "train.txt"
        with sample.open(encoding="utf8") as source:
            train.write_text("".join(line for _, line in zip(range(args.lines), source)), encoding="utf8")
        for round_ in range(args.rounds):
            for index, checkout in enumerate(checkouts):
                result = run_once(checkout, args.settings, train, Path(tmp) / f"run{round_}_{index}", args.steps)
                times[checkout].append(result["seconds"])
                speeds[checkout].append(result["tokens_per_second"])
                losses[checkout] = result["loss"]
                print(f"round {round_ + 1} {checkout}: {result['seconds']:.1f} s, "
                      f"training {result['tokens_per_second']:,.0f} tokens/s, loss {result['loss']:.4f} at step {result['step']}", flush=True)
    for checkout in checkouts:
        print(
            f"{checkout}: median {statistics.median(times[checkout]):.1f} s, training "
            f"{statistics.median(speeds[checkout]):,.0f} tokens/s over {args.rounds} rounds, last loss {losses[checkout]:.4f}"
        )
    if args.other:
        ratio = statistics.median(times[checkouts[1]]) / statistics.median(times[ROOT])
        speed_ratio = statistics.median(speeds[ROOT]) / statistics.median(speeds[checkouts[1]])
        print(f"this checkout is {ratio:.2f}x the other's speed (whole process), {speed_ratio:.2f}x (training tokens/s)")


if __name__ == "__main__":
    main()
