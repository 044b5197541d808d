"""Pretrain a biLM within a fixed time (a time-limited GPU job): time a few steps, then one schedule that fits.

Usage:
    python tools/pretrain_in_time.py CONFIG OUTPUT_DIR --seconds 540 [--init-from english-compact]
        [--precisions bf16,fp32] [--calibration-steps 40] [--peak 0.001]
        [--section.key value ...]

First `--calibration-steps` steps at each precision (in a temporary directory beside OUTPUT_DIR,
removed after), then one run in OUTPUT_DIR at the faster one, whose schedule (warm-up over 5% of
the steps, constant, then an anneal over the last half to a tenth of `--peak`) is sized to the
time left. At the deadline the run stops before its next step and its last checkpoint is exported
again, so OUTPUT_DIR holds one consistent biLM; `python -m spacy_elmo pretrain OUTPUT_DIR/config.cfg
OUTPUT_DIR --resume --init-from ...` ends the same schedule.
Needs only PyTorch and the package's pure-Python dependencies (no spaCy) when the text is
pretokenized (tools/pretokenize_text.py; `--corpus.tokenizer whitespace --corpus.split_sentences false`).
"""
import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from spacy_elmo.errors import SpacyElmoError
from spacy_elmo.models.pytorch.options import BiLMOptions
from spacy_elmo.pretraining.checkpoint import load_checkpoint
from spacy_elmo.pretraining.config import load_config
from spacy_elmo.pretraining.assembly import assemble_model
from spacy_elmo.pretraining.run import pretrain
from spacy_elmo.pretraining.run_directory import RunDirectory
from spacy_elmo.sigterm import request_stop, stopping_on_sigterm

#: Seconds kept after the last step: final evaluation and export.
FINISH_SECONDS = 45
#: Held-out evaluations (and as many checkpoints) in the main run, and seconds guessed for each pair.
N_EVALUATIONS, PAUSE_SECONDS = 10, 5
#: A long run is slower than its first steps (on an H200, 292k tokens/s against 343k in
#: calibration: the shuffle buffer's refills, the token cache's later passes).
SPEED_KEPT = 0.8


class PlanError(SpacyElmoError):
    """The time or the calibration leaves no schedule to plan."""


def parse_overrides(args: List[str]) -> Dict[str, Any]:
    """``--section.key value`` pairs; values are JSON where they parse as JSON, else strings."""
    if len(args) % 2 or not all(arg.startswith("--") and "." in arg for arg in args[::2]):
        raise PlanError(f"config overrides come as --section.key value pairs, got: {' '.join(args)}")
    overrides = {}
    for key, value in zip(args[::2], args[1::2]):
        try:
            overrides[key[2:]] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key[2:]] = value
    return overrides


def median_speed(run_dir: Path, after_step: int) -> float:
    """Median training tokens/s of a run's log records after `after_step`."""
    records = RunDirectory(run_dir).metrics.read()
    speeds = [r["tokens_per_second"] for r in records if r.get("kind") == "train" and r["step"] > after_step]
    if not speeds:
        raise PlanError(f"calibration logged no step after step {after_step}: give --calibration-steps of at least 20")
    return statistics.median(speeds)


def plan_steps(seconds_left: float, setup_seconds: float, tokens_per_second: float, tokens_per_step: int) -> int:
    """Steps that fit `seconds_left` after the run's set-up, its evaluations and checkpoints, and the finish."""
    training = seconds_left - setup_seconds - FINISH_SECONDS - N_EVALUATIONS * PAUSE_SECONDS
    steps = int(SPEED_KEPT * training * tokens_per_second / tokens_per_step)
    if steps < 20:
        raise PlanError(f"{seconds_left:.0f} s left after calibration: too little for a schedule (give more --seconds)")
    return steps


def calibrate(
    config_path: Path, scratch: Path, *, overrides: Dict[str, Any], init_from: Optional[str], precision: str,
    steps: int, device: torch.device,
) -> Dict[str, float]:
    """Training tokens/s at `precision`, the seconds the run spent outside its steps (set-up,
    saving), and its tokens per step."""
    config = load_config(config_path, {
        **overrides, "training.precision": precision, "training.max_steps": steps, "training.log_every": 10,
        "training.eval_at_start": False, "training.eval_every": 10**9, "training.checkpoint_every": 10**9,
    })
    start = time.time()
    pretrain(config, scratch / precision, device=device, init_from=init_from)
    speed = median_speed(scratch / precision, after_step=10)
    stepping = steps * config.training.tokens_per_step / speed
    return {
        "tokens_per_second": speed, "setup_seconds": max(0.0, time.time() - start - stepping),
        "tokens_per_step": config.training.tokens_per_step,
    }


def train_until(
    config_path: Path, output_dir: Path, *, overrides: Dict[str, Any], init_from: Optional[str], precision: str,
    steps: int, peak: float, stop_after: float, device: torch.device,
) -> Dict[str, Any]:
    """The planned run; a stop request `stop_after` seconds from now ends it before its next step."""
    every = max(25, steps // N_EVALUATIONS)
    config = load_config(config_path, {
        **overrides, "training.precision": precision, "training.max_steps": steps,
        "training.eval_every": every, "training.checkpoint_every": every,
        "optimizer.learn_rate": peak, "optimizer.warmup_steps": max(10, steps // 20),
        "optimizer.anneal_steps": steps // 2, "optimizer.anneal_to": 0.1,
    })
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: request_stop(signum))
    signal.setitimer(signal.ITIMER_REAL, max(0.001, stop_after))
    try:
        with stopping_on_sigterm():
            return pretrain(config, output_dir, device=device, init_from=init_from)
    except KeyboardInterrupt:
        if signal.getitimer(signal.ITIMER_REAL)[0] > 0:
            raise  # Ctrl-C or SIGTERM, not the deadline
        print(f"Stopped at the deadline; `--resume` in {output_dir} ends the schedule", flush=True)
        return {"stopped": True}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def export_last_checkpoint(run_dir: Path) -> None:
    """Export the checkpoint's biLM and softmax again: a stop may have cut the last export in two."""
    directory = RunDirectory(run_dir)
    state = load_checkpoint(directory.checkpoint)
    vocab = directory.read_vocab()
    model = assemble_model(len(vocab), options=BiLMOptions.from_dict(state["options"]), state=state["model"])
    with stopping_on_sigterm():  # entering clears the deadline's stop request, which would refuse the writes
        directory.export(model, vocab, state["step"])


def run(
    config_path: Path, output_dir: Path, *, seconds: float, overrides: Dict[str, Any], init_from: Optional[str],
    precisions: List[str], calibration_steps: int, peak: float, started: float,
) -> Dict[str, Any]:
    """Calibrate each precision, then train the planned run in `output_dir` until `started + seconds`."""
    if RunDirectory(output_dir).checkpoint.exists():
        raise PlanError(f"{output_dir} already holds a run: resume it with pretrain --resume, or choose another directory")
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0) if device.type == 'cuda' else 'cpu'}", flush=True)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{output_dir.name}.calibration-", dir=output_dir.parent) as scratch:
        measured = {
            precision: calibrate(
                config_path, Path(scratch), overrides=overrides, init_from=init_from, precision=precision,
                steps=calibration_steps, device=device,
            )
            for precision in precisions
        }
    for precision, result in measured.items():
        print(f"{precision}: {result['tokens_per_second']:,.0f} tokens/s, {result['setup_seconds']:.1f} s of set-up", flush=True)
    precision = max(measured, key=lambda name: measured[name]["tokens_per_second"])
    best = measured[precision]
    tokens_per_step = int(best["tokens_per_step"])
    seconds_left = seconds - (time.time() - started)
    steps = plan_steps(seconds_left, best["setup_seconds"], best["tokens_per_second"], tokens_per_step)
    print(f"{steps} steps of {tokens_per_step:,} tokens at {precision}", flush=True)
    result = train_until(
        config_path, output_dir, overrides=overrides, init_from=init_from, precision=precision, steps=steps,
        peak=peak, stop_after=seconds_left - FINISH_SECONDS / 2, device=device,
    )
    if result.get("stopped") and RunDirectory(output_dir).checkpoint.exists():
        export_last_checkpoint(output_dir)
    return result


def main() -> None:
    started = time.time()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--seconds", type=float, required=True, help="wall time for everything")
    parser.add_argument("--init-from", default=None, help="biLM to continue (a path or a model name)")
    parser.add_argument("--precisions", default="bf16,fp32", help="precisions to time, comma-separated")
    parser.add_argument("--calibration-steps", type=int, default=40, help="steps timed per precision (at least 20)")
    parser.add_argument("--peak", type=float, default=0.001, help="peak learning rate")
    args, rest = parser.parse_known_args()
    try:
        result = run(
            args.config, args.output_dir, seconds=args.seconds, overrides=parse_overrides(rest),
            init_from=args.init_from, precisions=args.precisions.split(","), calibration_steps=args.calibration_steps,
            peak=args.peak, started=started,
        )
        print(json.dumps(result), flush=True)
    except SpacyElmoError as err:
        sys.exit(f"✘ {err}")


if __name__ == "__main__":
    main()
