"""Inference throughput and peak memory of `embed`-style ELMo inference.

Builds a randomly initialised biLM of a named size and embeds sentences whose
lengths and words come from UD English-EWT dev, in their natural order, as the
`embed` command does. Each configuration runs in its own process so that peak
RSS is its own.

    python benchmarks/bench_inference.py --size original --batch-sizes 1 32

`--model english-compact` (a name or directory) times trained weights instead.
`--profile` prints where one pass's time goes (torch.profiler). `--deviation` prints
instead how far the int8 path's layers lie from fp32's on the same sentences (per
layer: mean absolute deviation, mean magnitude, the lowest per-token cosine similarity).
"""
import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import List

DEFAULT_CONLLU = Path(__file__).resolve().parents[2] / "shared/data/ud_english_ewt/en_ewt-ud-dev.conllu"


def read_sentences(path: Path, n: int, seed: int) -> List[List[str]]:
    """`n` sentences (token forms) drawn at random from a CoNLL-U file."""
    sentences, current = [], []
    for line in path.read_text(encoding="utf8").splitlines():
        if not line:
            if current:
                sentences.append(current)
            current = []
        elif not line.startswith("#"):
            fields = line.split("\t")
            if fields[0].isdigit():
                current.append(fields[1])
    return random.Random(seed).sample(sentences, n)


def build_bilm_and_sentences(args: argparse.Namespace):
    """The biLM of ``args.model`` (weights loaded) or else a randomly initialised one
    of ``args.size`` (seed 0), on ``args.threads`` threads, and the EWT dev sentences
    to embed."""
    import torch

    from spacy_elmo.models.pytorch.bilm import ElmoBiLM
    from spacy_elmo.models.pytorch.options import NAMED_SIZES

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    sentences = read_sentences(args.conllu, args.n_sentences, seed=0)
    if args.model:
        from spacy_elmo.models.loaders import load_named_weights

        return load_named_weights(args.model), sentences
    return ElmoBiLM(NAMED_SIZES[args.size]), sentences


def timed_pass(args: argparse.Namespace):
    """The sentences and tokens, and a function that embeds them all once and returns the seconds."""
    import torch

    from spacy_elmo.models.pytorch.embedder import ElmoEmbedder

    bilm, sentences = build_bilm_and_sentences(args)
    if args.implementation == "reference":
        from reference_loop import ReferenceBiLM

        bilm = ReferenceBiLM(bilm)
    n_tokens = sum(len(s) for s in sentences)
    # int8: the opt-in CPU path (the LSTM's products in int8 where faster); bf16: autocast.
    precision = {"precision": "int8"} if args.dtype == "int8" else {}
    embedder = ElmoEmbedder(
        bilm, batch_size=args.batch_size, device=args.device,
        sort_window=args.sort_window, **precision,
    )
    dtype = {"fp32": None, "int8": None, "bf16": torch.bfloat16}[args.dtype]

    def once() -> float:
        start = time.perf_counter()
        with torch.autocast(args.device.split(":")[0], dtype=dtype, enabled=dtype is not None):
            for _ in embedder.embed(sentences):
                pass
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - start

    return len(sentences), n_tokens, once


def run_one(args: argparse.Namespace) -> dict:
    """Time one (size, batch size, device, dtype) configuration in this process."""
    n_sentences, n_tokens, once = timed_pass(args)
    once() if args.warmup else None
    times = [once() for _ in range(args.repeats)]
    return {
        "implementation": args.implementation, "size": args.model or args.size, "batch_size": args.batch_size, "device": args.device, "dtype": args.dtype,
        "sort_window": args.sort_window, "sentences": n_sentences, "tokens": n_tokens,
        "tokens_per_s": [round(n_tokens / t, 1) for t in times],
        "median_tokens_per_s": round(n_tokens / statistics.median(times), 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def print_deviation(args: argparse.Namespace) -> None:
    """The int8 path's layers against fp32's, per layer, at the first batch size."""
    import torch

    from spacy_elmo.models.pytorch.embedder import ElmoEmbedder

    bilm, sentences = build_bilm_and_sentences(args)
    layers = {}
    for precision in ("fp32", "int8"):
        embedder = ElmoEmbedder(bilm, batch_size=args.batch_sizes[0], sort_window=args.sort_window, precision=precision)
        # (layers, tokens, width) per sentence -> (layers, all tokens, width)
        layers[precision] = torch.cat([torch.as_tensor(v) for v in embedder.embed(sentences)], dim=1)
    exact, int8 = layers["fp32"], layers["int8"]
    cosine = torch.nn.functional.cosine_similarity(int8, exact, dim=-1)
    print(f"{args.model or args.size}, {exact.shape[1]} tokens, batch {args.batch_sizes[0]}: int8 against fp32")
    for k in range(exact.shape[0]):
        print(
            f"layer {k}: mean |int8 - fp32| {(int8[k] - exact[k]).abs().mean():.5f}, "
            f"mean |fp32| {exact[k].abs().mean():.4f}, lowest cosine {cosine[k].min():.6f}"
        )


def print_profile(args: argparse.Namespace) -> None:
    """Where one pass's time goes (torch.profiler, after a warm-up pass), at the first batch size and dtype."""
    from torch.profiler import ProfilerActivity, profile

    args.batch_size, args.dtype = args.batch_sizes[0], args.dtypes[0]
    _, n_tokens, once = timed_pass(args)
    once()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
    with profile(activities=activities) as profiled:
        seconds = once()
    print(f"{n_tokens / seconds:,.0f} tokens/s while profiled, batch {args.batch_size}")
    print(profiled.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    if args.device.startswith("cuda"):
        print(profiled.key_averages().table(sort_by="self_cuda_time_total", row_limit=15))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="original", choices=["tiny", "compact", "small", "medium", "original"])
    parser.add_argument("--model", default=None, help="a model name or directory (weights loaded; replaces --size)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--n-sentences", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sort-window", type=int, default=64, help="batches sorted by length together (1: none)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--implementation", default="spacy-elmo", choices=["spacy-elmo", "reference"],
        help="'reference': AllenNLP's algorithm (benchmarks/reference_loop.py), as a baseline",
    )
    parser.add_argument("--dtypes", nargs="+", default=["fp32"], choices=["fp32", "bf16", "int8"])
    parser.add_argument("--conllu", type=Path, default=DEFAULT_CONLLU)
    parser.add_argument("--no-warmup", dest="warmup", action="store_false")
    parser.add_argument("--deviation", action="store_true", help="int8 against fp32 instead of timings")
    parser.add_argument("--profile", action="store_true", help="where one pass's time goes instead of timings")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dtype", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args)))
        return
    if not args.conllu.exists():
        sys.exit(f"Sentences file not found: {args.conllu} (pass --conllu)")
    if args.deviation:
        print_deviation(args)
        return
    if args.profile:
        print_profile(args)
        return
    print(f"{'implementation':14} {'size':15} {'device':6} {'dtype':5} {'batch':>5} {'sort':>4} {'tokens':>6} {'median tok/s':>12} {'runs tok/s':>24} {'peak RSS MB':>11}")
    for dtype in args.dtypes:
        for batch_size in args.batch_sizes:
            command = [
                sys.executable, __file__, "--one", "--size", args.size, "--batch-size", str(batch_size),
                *(["--model", args.model] if args.model else []),
                "--n-sentences", str(args.n_sentences), "--repeats", str(args.repeats),
                "--threads", str(args.threads), "--sort-window", str(args.sort_window),
                "--device", args.device, "--dtype", dtype, "--conllu", str(args.conllu),
                "--implementation", args.implementation,
            ] + ([] if args.warmup else ["--no-warmup"])
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"batch {batch_size}, {dtype}: failed:\n{done.stderr[-3000:]}")
            result = json.loads(done.stdout)
            runs = ", ".join(str(r) for r in result["tokens_per_s"])
            print(
                f"{result['implementation']:14} {result['size']:15} {result['device']:6} {result['dtype']:5} {batch_size:>5} "
                f"{result['sort_window']:>4} {result['tokens']:>6} {result['median_tokens_per_s']:>12} "
                f"{runs:>24} {result['peak_rss_mb']:>11}", flush=True,
            )


if __name__ == "__main__":
    main()
