"""Pretraining steps with the batch stream drawing ahead in the background, or in place.

Each `sort_window` steps the stream draws the next batches: it reads and
shuffles `sort_window * tokens_per_step` tokens' worth of sentences, seconds of
Python for GPU-sized steps. Drawn in place, the accelerator waits for it; drawn
in the background, it overlaps the training steps. This runs the real training
step (``Trainer.train_step``) on the real stream over a whitespace-tokenized text,
alternating rounds with ``prefetch`` on and off, and prints the median tokens/s
and the longest wait for a batch of each.

    python benchmarks/bench_batch_stream.py --text train.tok --device cuda --steps 100
    flock /tmp/spacy-elmo-heavy.lock python benchmarks/bench_batch_stream.py --text train.tok \\
        --device cpu --tokens-per-step 4096 --steps 40 --sleep 0.25   # a GPU-bound step, simulated
"""
import argparse
import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Dict

import torch

from spacy_elmo.pretraining.config import parse_config
from spacy_elmo.pretraining.batch_stream import BatchStream
from spacy_elmo.pretraining.corpus import CorpusReader, TextSplitter
from spacy_elmo.pretraining.default_config import default_config_text
from spacy_elmo.pretraining.assembly import assemble_model
from spacy_elmo.pretraining.language_model import n_predictions
from spacy_elmo.pretraining.processes import Processes
from spacy_elmo.pretraining.tokenized_files import TokenizedFiles
from spacy_elmo.pretraining.trainer import Trainer
from spacy_elmo.pretraining.vocab import Vocabulary

SHIPPED_VOCAB = Path(__file__).parent.parent / "models" / "english-compact-lm" / "spacy_elmo_english_compact_lm" / "vocab.txt"


def one_round(args: argparse.Namespace, trainer: Trainer, cache: TokenizedFiles, *, prefetch: bool) -> Dict[str, float]:
    reader = CorpusReader([args.text], TextSplitter(tokenizer="whitespace"), seed=args.seed, cache=cache)
    stream = BatchStream(
        reader, tokens_per_batch=args.tokens_per_step, shuffle_buffer=args.shuffle_buffer,
        sort_window=args.sort_window, seed=args.seed, prefetch=prefetch,
    )
    trainer.train_step(stream.next_batch())  # the first draw is in place either way
    waits, tokens = [], 0
    start = time.perf_counter()
    for _ in range(args.steps):
        asked = time.perf_counter()
        batch = stream.next_batch()
        waits.append(time.perf_counter() - asked)
        trainer.train_step(batch)
        if args.sleep:
            time.sleep(args.sleep)  # a step the accelerator spends while Python waits
        tokens += n_predictions(batch)
    seconds = time.perf_counter() - start
    stream.close()  # a draw left running would share the next round's time
    return {"tokens_per_second": tokens / seconds, "longest_wait": max(waits), "waited": sum(waits)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text", type=Path, required=True, help="whitespace-tokenized text, a sentence per line")
    parser.add_argument("--vocab", type=Path, default=SHIPPED_VOCAB)
    parser.add_argument("--size", default="compact")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens-per-step", type=int, default=65536)
    parser.add_argument("--sort-window", type=int, default=32)
    parser.add_argument("--shuffle-buffer", type=int, default=20000)
    parser.add_argument("--steps", type=int, default=100, help="timed steps per round (a draw every sort-window steps)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per setting, alternating")
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds added to each step, GIL released")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = parse_config(
        default_config_text(size=args.size),
        {"paths.train": str(args.text), "system.seed": args.seed, "training.tokens_per_step": args.tokens_per_step},
    )
    vocab = Vocabulary.from_disk(args.vocab)
    torch.manual_seed(args.seed)
    model = assemble_model(len(vocab), dropout=config.training.dropout, options=config.bilm_options())
    trainer = Trainer.from_config(model, vocab, Processes(0, 1, torch.device(args.device)), config)
    results: Dict[bool, list] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        cache = TokenizedFiles(Path(tmp), "bench")  # as in a run: the text tokenized once, then read from JSON lines
        for _ in CorpusReader([args.text], TextSplitter(tokenizer="whitespace"), cache=cache).sentences():
            pass
        for _, prefetch in itertools.product(range(args.rounds), (False, True)):
            result = one_round(args, trainer, cache, prefetch=prefetch)
            results[prefetch].append(result)
            print(
                f"prefetch={prefetch!s:<5} {result['tokens_per_second']:>10,.0f} tokens/s, longest wait for a batch "
                f"{result['longest_wait']:.3f} s, {result['waited']:.2f} s waited in {args.steps} steps",
                flush=True,
            )
    medians = {p: statistics.median(r["tokens_per_second"] for r in results[p]) for p in results}
    print(
        f"{args.size} on {args.device}, {args.tokens_per_step} tokens/step, sort window {args.sort_window}: "
        f"in place {medians[False]:,.0f} tokens/s, in the background {medians[True]:,.0f} "
        f"({medians[True] / medians[False]:.2f}x), medians of {args.rounds} rounds"
    )


if __name__ == "__main__":
    main()
