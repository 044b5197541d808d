"""Tokens/s of the LSTM engine's paths side by side, and each one's deviation.

Times :class:`BiLstmStack` alone (no character CNN, no spaCy: only torch, and Triton
for the fused path) on packed random inputs whose sentence lengths follow UD
English-EWT dev (mean 17 tokens, a long tail), for each path given, at each batch
size, in one process so that all run on the same machine; medians of ``--repeats``
after warm-up. Each path's largest deviation from the reference cell on the first
batch is printed beside it (fp32, TF32 off). With ``--train``, each repeat runs a forward
and a backward (the paths ``recurrence``, ``fused``, ``reference``), and the deviation
is the weights' gradients' from the reference's.

    python benchmarks/bench_lstm_paths.py --device cuda --size compact --batch-sizes 32 256 \\
        --paths prediction fused
    python benchmarks/bench_lstm_paths.py --device cuda --size compact --batch-sizes 32 256 \\
        --train --paths recurrence fused
    TRITON_INTERPRET=1 python benchmarks/bench_lstm_paths.py --size tiny --batch-sizes 4 \\
        --paths prediction fused --repeats 1 --batches 2 --max-length 12   # the script itself, on CPU

Needs no data: the length distribution is built in (``--mean-length``, ``--max-length``).
"""
import argparse
import dataclasses
import statistics
import time
from typing import Dict, List

import torch

from spacy_elmo.models.pytorch.lstm import BiLstmStack, PackingPlan
from spacy_elmo.models.pytorch.options import NAMED_SIZES


def sentence_lengths(n: int, mean: float, longest: int, generator: torch.Generator) -> List[int]:
    """`n` lengths from a geometric-like distribution of mean `mean`, at most `longest`, longest first."""
    uniform = torch.rand(n, generator=generator).clamp_min(1e-6)
    lengths = (-mean * torch.log(uniform)).round().clamp(1, longest).long() + 1  # + the boundary step
    return sorted(lengths.tolist(), reverse=True)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(stack: BiLstmStack, inputs: torch.Tensor, plan: PackingPlan, path: str, train: bool) -> List[torch.Tensor]:
    """The last layer's outputs; in training, after a backward, the weights' gradients."""
    if not train:
        return [stack(inputs, plan, path=path)[0][-1]]
    stack.zero_grad(set_to_none=True)
    torch.manual_seed(1)  # the same dropout masks for every path
    outputs, _ = stack(inputs, plan, path=path)
    sum(layer.square().mean() for layer in outputs).backward()
    return [parameter.grad for parameter in stack.parameters()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", default="compact", choices=sorted(NAMED_SIZES))
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 256])
    parser.add_argument("--paths", nargs="+", default=["prediction", "fused"])
    parser.add_argument("--batches", type=int, default=20, help="batches per repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mean-length", type=float, default=17.0)
    parser.add_argument("--max-length", type=int, default=120)
    parser.add_argument("--train", action="store_true", help="time a forward and a backward")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    options = NAMED_SIZES[args.size]
    torch.manual_seed(0)
    stack = BiLstmStack(dataclasses.replace(options)).to(device).train(args.train)
    generator = torch.Generator().manual_seed(0)
    print(f"{args.size}: LSTM {options.n_layers} x {options.lstm_dim}, projection {options.projection_dim}; "
          f"{device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else torch.get_num_threads()} "
          f"{'' if device.type == 'cuda' else 'threads'})")
    for batch_size in args.batch_sizes:
        batches = []
        for _ in range(args.batches):
            plan = PackingPlan.from_sorted_lengths(
                sentence_lengths(batch_size, args.mean_length, args.max_length, generator)
            )
            inputs = torch.randn(2, plan.n_rows, options.projection_dim, generator=generator).to(device)
            batches.append((inputs, plan))
        n_tokens = sum(plan.n_rows - plan.batch_sizes[0] for _, plan in batches)  # less one boundary step each
        with torch.set_grad_enabled(args.train):
            reference = run(stack, *batches[0], "reference", args.train)
            times: Dict[str, List[float]] = {path: [] for path in args.paths}
            deviation: Dict[str, float] = {}
            for path in args.paths:
                got = run(stack, *batches[0], path, args.train)
                deviation[path] = max((a - b).abs().max().item() for a, b in zip(got, reference))
            for repeat in range(args.repeats + 1):
                for path in args.paths:  # the paths take turns
                    synchronize(device)
                    start = time.perf_counter()
                    for inputs, plan in batches:
                        run(stack, inputs, plan, path, args.train)
                    synchronize(device)
                    if repeat > 0:  # the first round warms up (kernels compiled, caches filled)
                        times[path].append(time.perf_counter() - start)
        print(f"batch {batch_size}: " + "; ".join(
            f"{path} {n_tokens / statistics.median(times[path]):,.0f} tokens/s (deviation {deviation[path]:.1e})"
            for path in args.paths
        ), flush=True)


if __name__ == "__main__":
    main()
