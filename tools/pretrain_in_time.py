"""Pretrain a biLM within a fixed time, e.g. a GPU lease: time a few steps, then one schedule that fits.

Usage:
    python tools/pretrain_in_time.py CONFIG OUTPUT_DIR --seconds 540 [--init-from english-compact]
        [--precisions bf16,fp32] [--calibration-steps 40] [--peak 0.001] [--bring-back DIR]
        [--section.key value ...]

First `--calibration-steps` steps at each precision (in OUTPUT_DIR.calibrate_PRECISION), then one
run in OUTPUT_DIR at the faster one, whose schedule (warm-up over 5% of the steps, constant, then
an anneal over the last half to a tenth of `--peak`) is sized to the time left. At the deadline
the run stops as Ctrl-C stops it: its last checkpoint stays, and
`python -m spacy_elmo pretrain OUTPUT_DIR/config.cfg OUTPUT_DIR --resume --init-from ...` ends
the same schedule. With `--bring-back DIR`, the exported biLM (weights.hdf5, softmax.hdf5), its
metrics and plot are copied to DIR, the models in parts of at most 15 MB
(`cat weights.hdf5.part* > weights.hdf5` joins them).
Needs only PyTorch and the package's pure-Python dependencies (no spaCy) when the text is
pretokenized (tools/pretokenize_text.py; `--corpus.tokenizer whitespace --corpus.split_sentences false`).
"""
import argparse
import json
import shutil
import signal
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from spacy_elmo.pretraining.config import load_config
from spacy_elmo.pretraining.run import pretrain

#: Seconds after the last step: final evaluation, export, bringing the files back.
FINISH_SECONDS = 45
#: Seconds guessed per held-out evaluation and checkpoint (ten of each).
PAUSE_SECONDS = 3
PART_BYTES = 15_000_000


def parse_overrides(args: List[str]) -> Dict[str, Any]:
    """``--section.key value`` pairs; values are JSON where they parse as JSON, else strings."""
    if len(args) % 2 or not all(arg.startswith("--") for arg in args[::2]):
        raise SystemExit(f"✘ config overrides come as --section.key value pairs, got: {' '.join(args)}")
    overrides = {}
    for key, value in zip(args[::2], args[1::2]):
        try:
            overrides[key[2:]] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key[2:]] = value
    return overrides


def median_speed(run_dir: Path, after_step: int) -> float:
    """Median training tokens/s of a run's log records after `after_step`."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    speeds = [r["tokens_per_second"] for r in records if r.get("kind") == "train" and r["step"] > after_step]
    return statistics.median(speeds) if speeds else 0.0


def plan_steps(seconds_left: float, tokens_per_second: float, tokens_per_step: int) -> int:
    """Steps that fit `seconds_left`, less the evaluations, checkpoints and the finish.

    A long run is slower than its first steps (on an H200, 292k tokens/s against 343k in
    calibration: the shuffle buffer's refills, the token cache's later epochs), so only
    80% of the calibrated speed is counted on.
    """
    training = seconds_left - FINISH_SECONDS - 20 * PAUSE_SECONDS
    return max(50, int(0.8 * training * tokens_per_second / tokens_per_step))


def _stop_at_deadline(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt("the time is up")


def bring_back(run_dir: Path, target: Path) -> List[str]:
    """Copy the run's biLM (in parts), metrics and plot to `target`; returns the names written."""
    target.mkdir(parents=True, exist_ok=True)
    for name in ("weights.hdf5", "softmax.hdf5"):
        data = (run_dir / name).read_bytes()
        for part, start in enumerate(range(0, len(data), PART_BYTES)):
            (target / f"{name}.part{part:02d}").write_bytes(data[start : start + PART_BYTES])
    for name in ("metrics.jsonl", "perplexity.png", "config.cfg"):
        if (run_dir / name).exists():
            shutil.copyfile(run_dir / name, target / name)
    return sorted(path.name for path in target.iterdir())


def run(
    config_path: Path, output_dir: Path, *, seconds: float, overrides: Dict[str, Any], init_from: Optional[str],
    precisions: List[str], calibration_steps: int, peak: float, started: float,
) -> Dict[str, Any]:
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0) if device.type == 'cuda' else 'cpu'}", flush=True)
    speeds = {}
    for precision in precisions:
        calibration = output_dir.with_name(f"{output_dir.name}.calibrate_{precision}")
        config = load_config(config_path, {
            **overrides, "training.precision": precision, "training.max_steps": calibration_steps,
            "training.log_every": 10, "training.eval_at_start": False, "training.eval_every": 10**9,
            "training.checkpoint_every": 10**9, "optimizer.learn_rate": peak / 10, "optimizer.warmup_steps": 1,
        })
        pretrain(config, calibration, device=device, init_from=init_from)
        speeds[precision] = median_speed(calibration, after_step=10)
        print(f"{precision}: {speeds[precision]:,.0f} tokens/s", flush=True)
    precision = max(speeds, key=lambda name: speeds[name])
    tokens_per_step = load_config(config_path, overrides).training.tokens_per_step
    steps = plan_steps(seconds - (time.time() - started), speeds[precision], tokens_per_step)
    every = max(25, steps // 10)
    print(f"{steps} steps of {tokens_per_step:,} tokens at {precision}", flush=True)
    config = load_config(config_path, {
        **overrides, "training.precision": precision, "training.max_steps": steps,
        "training.eval_every": every, "training.checkpoint_every": 2 * every,
        "optimizer.learn_rate": peak, "optimizer.warmup_steps": max(10, steps // 20),
        "optimizer.anneal_steps": steps // 2, "optimizer.anneal_to": 0.1,
    })
    previous = signal.signal(signal.SIGALRM, _stop_at_deadline)
    signal.alarm(max(1, int(seconds - (time.time() - started) - FINISH_SECONDS / 2)))
    try:
        return pretrain(config, output_dir, device=device, init_from=init_from)
    except KeyboardInterrupt:
        print(f"Stopped at the deadline; resume {output_dir} with --resume to end its schedule", flush=True)
        return {"stopped": True}
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def main() -> None:
    started = time.time()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--seconds", type=float, required=True, help="wall time for everything")
    parser.add_argument("--init-from", default=None, help="biLM to continue (a path or a model name)")
    parser.add_argument("--precisions", default="bf16,fp32", help="precisions to time, comma-separated")
    parser.add_argument("--calibration-steps", type=int, default=40)
    parser.add_argument("--peak", type=float, default=0.001, help="peak learning rate")
    parser.add_argument("--bring-back", type=Path, default=None, help="copy the biLM here, in parts")
    args, rest = parser.parse_known_args()
    result = run(
        args.config, args.output_dir, seconds=args.seconds, overrides=parse_overrides(rest), init_from=args.init_from,
        precisions=args.precisions.split(","), calibration_steps=args.calibration_steps, peak=args.peak,
        started=started,
    )
    print(json.dumps(result), flush=True)
    if args.bring_back is not None and (args.output_dir / "weights.hdf5").exists():
        print(f"Brought back: {', '.join(bring_back(args.output_dir, args.bring_back))}", flush=True)


if __name__ == "__main__":
    main()
