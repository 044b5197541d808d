"""Per-product timings behind the int8 precision's rule (`lstm/int8_products.py`).

For the LSTM products of `english-compact` and the `original` size, the time of one
``(rows, in) @ (in, out)`` product in fp32 (`torch.mm`, and oneDNN with a prepacked
weight, as the LSTM steps run it: `prepacked_linear`) and through each int8 kernel this
CPU has (fbgemm, with 7-bit activations on CPUs without VNNI; oneDNN where the CPU
has AMX), in µs, the best of three rounds of many calls:

    python benchmarks/bench_int8_products.py --rows 1 8 32 256

With ``--weights-in-turn 4`` each call takes the next of four copies of the
weight, as an LSTM step multiplies four large weights in turn (per direction the
recurrent and projection weights of two layers): a weight too large for the cache
is then read from memory at every call, as in the LSTM. `read µs` is the time to
read one weight once (a plain sum over it): the memory's floor under any product.
"""
import argparse
import itertools
import time
from typing import Callable, List

import torch

from spacy_elmo.models.pytorch.lstm.int8_products import amx_available, int8_instructions, prepack
from spacy_elmo.models.pytorch.prepacked_linear import MIN_ROWS, PrepackedWeights

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
    parser.add_argument("--weights-in-turn", type=int, default=1, help="copies of each weight, used in turn")
    args = parser.parse_args()
    if args.weights_in_turn < 1:
        parser.error("--weights-in-turn must be at least 1")
    cpu = int8_instructions()
    if cpu is None:
        raise SystemExit("This CPU or torch build has no int8 path: nothing to compare")
    reduce_range = cpu == "avx2"  # 7-bit activations without VNNI, as the int8 path runs them
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    kernels: List[str] = ["fbgemm"] + (["onednn"] if amx_available() else [])
    print(
        f"{'product':22} {'in x out':>12} {'rows':>5} {'read µs':>8} {'fp32 µs':>9} {'packed µs':>10} "
        + " ".join(f"{k + ' µs':>10}" for k in kernels)
    )
    n_copies = args.weights_in_turn
    for name, (n_in, n_out) in SHAPES.items():
        weights = [torch.randn(n_in, n_out) / n_in**0.5 for _ in range(n_copies)]
        packed = [{kernel: prepack(weight, kernel) for kernel in kernels} for weight in weights]
        onednn_fp32 = PrepackedWeights()
        calls = 300 if n_in * n_out < 1_000_000 else 30
        reading = itertools.cycle(range(n_copies))
        read = best_microseconds(lambda: weights[next(reading)].sum(), calls)
        for rows in args.rows:
            x = torch.randn(rows, n_in)
            turn = itertools.cycle(range(n_copies))
            fp32 = best_microseconds(lambda: torch.mm(x, weights[next(turn)]), calls)
            fp32_packed = "–"  # the prepacked path declines a product of so few rows
            if rows >= MIN_ROWS and onednn_fp32.matmul(x, weights[0], (0,)) is not None:

                def run_packed() -> object:
                    i = next(turn)
                    return onednn_fp32.matmul(x, weights[i], (i,))

                fp32_packed = f"{best_microseconds(run_packed, calls):,.0f}"
            int8 = [
                best_microseconds(
                    lambda k=kernel: torch.ops.quantized.linear_dynamic(x, packed[next(turn)][k], reduce_range), calls
                )
                for kernel in kernels
            ]
            print(
                f"{name:22} {f'{n_in} x {n_out}':>12} {rows:>5} {read:>8,.0f} {fp32:>9,.0f} {fp32_packed:>10} "
                + " ".join(f"{t:>10,.0f}" for t in int8),
                flush=True,
            )


if __name__ == "__main__":
    main()
