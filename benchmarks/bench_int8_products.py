"""Per-product timings behind the int8 path's kernel choice (`int8_linear.choose_kernel`).

For the LSTM products of `english-compact` and the `original` size, the time of one
``(rows, in) @ (in, out)`` product in fp32 (`torch.mm`) and through each int8
kernel this CPU has (fbgemm; oneDNN where the CPU has AMX), in µs, the best of
three rounds of many calls:

    python benchmarks/bench_int8_products.py --rows 1 8 32 256
"""
import argparse
import time
from typing import Callable, List

import torch

from spacy_elmo.models.pytorch.int8_linear import amx_available, int8_available, prepack

SHAPES = {
    "english-compact gate": (128, 2048),
    "original gate": (512, 16384),
    "original projection": (4096, 512),
}


def best_microseconds(run: Callable[[], object], calls: int) -> float:
    for _ in range(max(1, calls // 10)):
        run()
    rounds = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return min(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 32, 256])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if not int8_available():
        raise SystemExit("This CPU has no int8 dot-product instructions (VNNI): nothing to compare")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    kernels: List[str] = ["fbgemm"] + (["onednn"] if amx_available() else [])
    print(f"{'product':22} {'in x out':>12} {'rows':>5} {'fp32 µs':>9} " + " ".join(f"{k + ' µs':>10}" for k in kernels))
    for name, (n_in, n_out) in SHAPES.items():
        weight = torch.randn(n_in, n_out) / n_in**0.5
        packed = {kernel: prepack(weight, kernel) for kernel in kernels}
        calls = 300 if n_in * n_out < 1_000_000 else 30
        for rows in args.rows:
            x = torch.randn(rows, n_in)
            fp32 = best_microseconds(lambda: torch.mm(x, weight), calls)
            int8 = [
                best_microseconds(lambda k=kernel: torch.ops.quantized.linear_dynamic(x, packed[k], False), calls)
                for kernel in kernels
            ]
            print(
                f"{name:22} {f'{n_in} x {n_out}':>12} {rows:>5} {fp32:>9,.0f} " + " ".join(f"{t:>10,.0f}" for t in int8),
                flush=True,
            )


if __name__ == "__main__":
    main()
