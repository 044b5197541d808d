"""Milliseconds per training step of the LSTM stack alone: per-step autograd vs one node per layer.

Forward and backward of :class:`BiLstmStack` (dropout 0.1, skip connections as
configured) on packed random inputs, the main-job model by default: the tiny
options with ``lstm_dim`` 128 and ``projection_dim`` 32, 330 sentences of 5-45
steps (about 8,200 rows per direction). Median and minimum of ``--repeats`` after
warmup, the two paths taking turns.

    flock /tmp/spacy-elmo-heavy.lock python benchmarks/bench_lstm_train.py
"""
import argparse
import dataclasses
import statistics
import time
from contextlib import contextmanager
from typing import Callable, ContextManager, Dict, Iterator, List

import torch

from spacy_elmo.models.pytorch.lstm import BiLstmStack, PackingPlan
from spacy_elmo.models.pytorch.options import NAMED_SIZES


def time_steps(step: Callable[[], None], modes: Dict[str, Callable[[], ContextManager]], *,
               warmup: int, repeats: int) -> Dict[str, List[float]]:
    """Milliseconds of `step` under each mode, the modes taking turns (fair on a busy machine)."""
    times: Dict[str, List[float]] = {name: [] for name in modes}
    for repeat in range(warmup + repeats):
        for name, mode in modes.items():
            with mode():
                start = time.perf_counter()
                step()
                if repeat >= warmup:
                    times[name].append(1000 * (time.perf_counter() - start))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--lstm-dim", type=int, default=128)
    parser.add_argument("--projection-dim", type=int, default=32)
    parser.add_argument("--sentences", type=int, default=330)
    parser.add_argument("--min-length", type=int, default=5)
    parser.add_argument("--max-length", type=int, default=45)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=None, help="default: torch's")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    options = dataclasses.replace(
        NAMED_SIZES[args.size], lstm_dim=args.lstm_dim, projection_dim=args.projection_dim
    )
    torch.manual_seed(0)
    stack = BiLstmStack(options).train()
    stack.set_dropout(args.dropout)
    lengths = torch.randint(args.min_length, args.max_length + 1, (args.sentences,))
    plan = PackingPlan.from_sorted_lengths(sorted(lengths.tolist(), reverse=True))
    inputs = torch.randn(2, sum(plan.batch_sizes), options.projection_dim, requires_grad=True)
    upstream = torch.randn(2, sum(plan.batch_sizes), options.projection_dim)

    path = ["auto"]

    @contextmanager
    def on_path(name: str) -> Iterator[None]:
        path[0] = name
        yield

    def step() -> None:
        outputs, _ = stack(inputs, plan, path=path[0])
        (outputs[-1] * upstream).sum().backward()

    times = time_steps(
        step, {"reference": lambda: on_path("reference"), "recurrence": lambda: on_path("recurrence")},
        warmup=args.warmup, repeats=args.repeats,
    )
    median = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"lstm {options.lstm_dim}/{options.projection_dim} x{options.n_layers}, {args.sentences} sentences, "
        f"{sum(plan.batch_sizes)} rows/direction, {torch.get_num_threads()} threads, median (min) of {args.repeats}: "
        + ", ".join(f"{name} {median[name]:.1f} ({min(times[name]):.1f}) ms/step" for name in times)
        + f"; {median['reference'] / median['recurrence']:.2f}x",
        flush=True,
    )


if __name__ == "__main__":
    main()
