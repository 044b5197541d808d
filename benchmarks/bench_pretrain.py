"""Training throughput of biLM pretraining (tokens per second), per model size and device.

Runs the real training step (``Trainer.step``: forward, sampled or full softmax,
backward, gradient clipping, optimizer update) on batches prepared as a run prepares
them (:class:`PreparedBatches`: a worker process on Linux), over a synthetic Zipfian corpus (random lowercase words, sentences of
10-40 words), so it needs no data files. A token is a word or a sentence end: the
predictions per direction.

    flock /tmp/spacy-elmo-heavy.lock python benchmarks/bench_pretrain.py --sizes compact small medium original
    python benchmarks/bench_pretrain.py --device cuda --sizes original --tokens-per-step 65536

On a GPU, ``--sync-check`` fails on the first op of the timed steps that makes the
host wait for the device (``torch.cuda.set_sync_debug_mode("error")``), and
``--busy`` reports the share of the timed steps' wall time the device spent in
kernels (torch.profiler):

    python benchmarks/bench_pretrain.py --device cuda --sizes compact original --sync-check --busy
"""
import argparse
import contextlib
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy
import torch

from spacy_elmo.pretraining.config import parse_config
from spacy_elmo.pretraining.default_config import default_config_text
from spacy_elmo.pretraining.batch_stream import BatchStream
from spacy_elmo.pretraining.batch_worker import PreparedBatches
from spacy_elmo.pretraining.corpus import CorpusReader, TextSplitter
from spacy_elmo.pretraining.processes import Processes
from spacy_elmo.pretraining.assembly import assemble_model
from spacy_elmo.pretraining.trainer import Trainer
from spacy_elmo.pretraining.vocab import SPECIAL_TOKENS, Vocabulary


def synthetic_corpus(path: Path, *, vocab_size: int, n_sentences: int, seed: int = 0) -> List[str]:
    """Write Zipf-distributed sentences; return the words, most frequent first."""
    rng = numpy.random.default_rng(seed)
    alphabet = numpy.array(list("abcdefghijklmnopqrstuvwxyz"))
    words, seen = [], set()
    while len(words) < vocab_size:
        word = "".join(rng.choice(alphabet, size=int(rng.integers(2, 12))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    ranks = numpy.arange(1, vocab_size + 1, dtype=numpy.float64)
    probabilities = 1.0 / ranks
    probabilities /= probabilities.sum()
    lengths = rng.integers(10, 41, size=n_sentences)
    ids = rng.choice(vocab_size, size=int(lengths.sum()), p=probabilities)
    bounds = numpy.concatenate([[0], numpy.cumsum(lengths)])
    with path.open("w", encoding="utf8") as handle:
        for start, end in zip(bounds[:-1], bounds[1:]):
            handle.write(" ".join(words[i] for i in ids[start:end]) + "\n")
    return words


def measure(
    size: str, *, device: torch.device, tokens_per_step: int, vocab_words: List[str], corpus: Path,
    negatives: int, precision: str, steps: int, warmup: int, dropout: float, sync_check: bool = False,
    busy: bool = False,
) -> Dict[str, float]:
    config = parse_config(
        default_config_text(size=size),
        {
            "paths.train": str(corpus), "corpus.tokenizer": "whitespace",
            "softmax.kind": "sampled", "softmax.n_negative_samples": negatives,
            "training.tokens_per_step": tokens_per_step, "training.precision": precision,
            "training.max_steps": steps, "training.dropout": dropout,
        },
    )
    vocab = Vocabulary(list(SPECIAL_TOKENS) + vocab_words)
    torch.manual_seed(0)
    model = assemble_model(len(vocab), dropout=config.training.dropout, options=config.bilm_options())
    trainer = Trainer.from_config(model, vocab, Processes(0, 1, device), config)
    stream = BatchStream(
        CorpusReader([corpus], TextSplitter(tokenizer="whitespace")),
        tokens_per_batch=tokens_per_step, shuffle_buffer=config.corpus.shuffle_buffer,
        sort_window=config.training.sort_window,
    )
    batches = PreparedBatches(stream, model.bilm.token_ids, vocab)
    try:
        for _ in range(warmup):
            trainer.step(trainer.with_negatives(batches.next_step()))
        time.sleep(2.0)  # the worker gets ahead, as it does while a run starts
        cuda = device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        profiler = _profiler(device) if busy else contextlib.nullcontext()
        tokens = 0
        with profiler:
            if sync_check and cuda:
                torch.cuda.set_sync_debug_mode("error")
            start = time.perf_counter()
            for _ in range(steps):
                tokens += trainer.step(trainer.with_negatives(batches.next_step())).n_tokens
            if sync_check and cuda:
                torch.cuda.set_sync_debug_mode("default")
            if cuda:
                torch.cuda.synchronize(device)
            seconds = time.perf_counter() - start
    finally:
        batches.close()
    n_params = sum(p.numel() for p in model.bilm.parameters())
    return {
        "size": size, "device": str(device), "precision": precision, "autocast": str(trainer.autocast_dtype),
        "tokens_per_step": tokens_per_step, "vocab": len(vocab), "negatives": negatives, "dropout": dropout,
        "bilm_parameters_millions": round(n_params / 1e6, 1), "steps": steps,
        "seconds_per_step": seconds / steps, "tokens_per_second": tokens / seconds,
        "threads": torch.get_num_threads(), "peak_memory_mb": peak_memory_mb(device),
        "device_busy": _busy_share(profiler, seconds) if busy else None,
    }


def _profiler(device: torch.device) -> Any:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    return profile(activities=activities)


def _busy_share(profiler: Any, seconds: float) -> Optional[float]:
    """The device's kernel time over the steps' wall time (None on a CPU: no device to be busy)."""
    kernels = [e for e in profiler.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not kernels:
        return None
    return sum(e.device_time for e in kernels) / 1e6 / seconds


def peak_memory_mb(device: torch.device) -> float:
    """CUDA: the most memory allocated during the timed steps. CPU: the process's peak
    resident memory so far (so with several sizes, each figure covers the earlier ones too:
    name one size per run for an exact figure)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["compact", "small", "original"], help="named sizes: tiny, compact (the shipped English biLM's), small, medium, original")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens-per-step", type=int, default=None, help="default: 2048 on CPU, 65536 on CUDA")
    parser.add_argument("--vocab-size", type=int, default=None, help="default: 100000 on CPU, 793471 on CUDA")
    parser.add_argument("--negatives", type=int, default=8192)
    parser.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    parser.add_argument(
        "--dropout", type=float, default=0.1,
        help="bilm-tf: 0.1; on CPU, dropout keeps the two LSTM directions on one thread (reproducible masks)",
    )
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--sync-check", action="store_true", help="CUDA: fail on an op that waits for the device")
    parser.add_argument("--busy", action="store_true", help="the device's share of the steps' wall time (profiler)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    tokens_per_step = args.tokens_per_step or (65536 if cuda else 2048)
    vocab_size = args.vocab_size or (793_471 if cuda else 100_000)
    n_sentences = max(2000, math.ceil(tokens_per_step * (args.steps + args.warmup + 2) / 25))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        words = synthetic_corpus(corpus, vocab_size=vocab_size, n_sentences=n_sentences)
        for size in args.sizes:
            result = measure(
                size, device=device, tokens_per_step=tokens_per_step, vocab_words=words, corpus=corpus,
                negatives=args.negatives, precision=args.precision, steps=args.steps, warmup=args.warmup,
                dropout=args.dropout, sync_check=args.sync_check, busy=args.busy,
            )
            results.append(result)
            print(
                f"{size:>9} {result['device']:>6} autocast={result['autocast']:<14} dropout={args.dropout} "
                f"{tokens_per_step} tok/step, vocab {len(words) + 3}, {args.negatives} negatives: "
                f"{result['seconds_per_step']:.2f} s/step, {result['tokens_per_second']:,.0f} tokens/s, "
                f"peak memory {result['peak_memory_mb']:,.0f} MB"
                + (f", device busy {result['device_busy']:.0%} of the time" if result["device_busy"] is not None else ""),
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf8")


if __name__ == "__main__":
    main()
