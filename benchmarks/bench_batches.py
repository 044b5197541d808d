"""Training batches made ready on the host: how fast one CPU core makes them, and how
long the training loop waits for them.

1. **One core**: the stream draws batches of `--tokens-per-step` tokens from a
   whitespace-tokenized text and prepares each for the device (character ids,
   packing plan, targets), on one core with one thread; tokens/s of ready batches,
   per distinct word (what training runs) beside per token (ids made for every
   token, then the distinct rows found among them: the earlier way).
2. **The loop**: steps that take `--device-seconds` each (a sleep standing for a
   device busy with the step), fed by the worker process or prepared in the loop;
   tokens/s the loop sees and the time it waited for batches.

Medians of `--rounds` rounds, the settings alternating within a round.

    python benchmarks/bench_batches.py --text train.txt
    python benchmarks/bench_batches.py --text train.txt --tokens-per-step 65536 --device-seconds 0.065
"""
import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch

from spacy_elmo.models.pytorch.char_ids import BYTE_IDS, batch_to_char_ids
from spacy_elmo.models.pytorch.host_batch import HostBatch
from spacy_elmo.pretraining.batch_stream import BatchStream
from spacy_elmo.pretraining.batch_worker import PreparedBatches, collect_rarely
from spacy_elmo.pretraining.corpus import CorpusReader, TextSplitter
from spacy_elmo.pretraining.language_model import LMBatch, n_predictions, target_ids
from spacy_elmo.pretraining.tokenized_files import TokenizedFiles
from spacy_elmo.pretraining.trainer import prepare_step
from spacy_elmo.pretraining.vocab import Vocabulary

SHIPPED_VOCAB = Path(__file__).parent.parent / "models" / "english-compact-lm" / "spacy_elmo_english_compact_lm" / "vocab.txt"


def per_token(sentences, vocab: Vocabulary) -> LMBatch:
    """The earlier preparation: 50 ids for every token, then the distinct rows among them."""
    return LMBatch.of(HostBatch.of(batch_to_char_ids(sentences), BYTE_IDS), target_ids(sentences, vocab))


def per_word(sentences, vocab: Vocabulary) -> LMBatch:
    return prepare_step(sentences, BYTE_IDS, vocab).batch


def one_core(args: argparse.Namespace, cache: TokenizedFiles, vocab: Vocabulary, prepare: Callable) -> float:
    """Tokens/s of ready batches: draw and prepare, in this process, collecting as the worker does."""
    collect_rarely()
    stream = BatchStream(_reader(args, cache), tokens_per_batch=args.tokens_per_step, seed=args.seed)
    prepare(stream.next_batch(), vocab)  # the first draw fills the shuffle buffer
    tokens, start = 0, time.perf_counter()
    for _ in range(args.steps):
        batch = stream.next_batch()
        prepare(batch, vocab)
        tokens += n_predictions(batch)
    return tokens / (time.perf_counter() - start)


def the_loop(args: argparse.Namespace, cache: TokenizedFiles, vocab: Vocabulary, worker: bool) -> Dict[str, float]:
    """Steps of `--device-seconds` fed by `PreparedBatches`: tokens/s and seconds waited for batches."""
    stream = BatchStream(_reader(args, cache), tokens_per_batch=args.tokens_per_step, seed=args.seed)
    batches = PreparedBatches(stream, BYTE_IDS, vocab, worker=worker)
    try:
        batches.next_step()
        time.sleep(args.warm_up)  # the worker fills its queue, as it does while a run starts
        waited, tokens, start = 0.0, 0, time.perf_counter()
        for _ in range(args.steps):
            asked = time.perf_counter()
            step = batches.next_step()
            waited += time.perf_counter() - asked
            time.sleep(args.device_seconds)
            tokens += step.n_tokens
        return {"tokens_per_second": tokens / (time.perf_counter() - start), "waited": waited}
    finally:
        batches.close()


def _reader(args: argparse.Namespace, cache: TokenizedFiles) -> CorpusReader:
    return CorpusReader([args.text], TextSplitter(tokenizer="whitespace"), seed=args.seed, cache=cache)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text", type=Path, required=True, help="whitespace-tokenized text, a sentence per line")
    parser.add_argument("--vocab", type=Path, default=SHIPPED_VOCAB)
    parser.add_argument("--tokens-per-step", type=int, default=65536)
    parser.add_argument("--steps", type=int, default=64, help="batches per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device-seconds", type=float, default=0.065, help="a step's device time (0.065: 1M tokens/s)")
    parser.add_argument("--warm-up", type=float, default=2.0, help="seconds for the worker to get ahead before timing")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core; the worker forks onto it too
    vocab = Vocabulary.from_disk(args.vocab)
    speeds: Dict[str, List[float]] = {"per token": [], "per distinct word": []}
    loops: Dict[bool, List[Dict[str, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        cache = TokenizedFiles(Path(tmp), "bench")  # as in a run: the text tokenized once, then read from JSON lines
        for _ in CorpusReader([args.text], TextSplitter(tokenizer="whitespace"), cache=cache).sentences():
            pass
        for round_ in range(args.rounds):
            for name, prepare in (("per token", per_token), ("per distinct word", per_word)):
                speeds[name].append(one_core(args, cache, vocab, prepare))
            print(f"round {round_ + 1}: " + ", ".join(f"{n} {s[-1]:,.0f}" for n, s in speeds.items()), flush=True)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, range(os.cpu_count() or 1))  # the loop and the worker, a core each
        for _ in range(args.rounds):
            for worker in (False, True):
                loops[worker].append(the_loop(args, cache, vocab, worker))
    print(
        f"ready batches of {args.tokens_per_step:,} tokens on one core, tokens/s (median of {args.rounds}): "
        + ", ".join(f"{name} {statistics.median(s):,.0f}" for name, s in speeds.items())
        + f" ({statistics.median(speeds['per distinct word']) / statistics.median(speeds['per token']):.2f}x)"
    )
    for worker, rounds in loops.items():
        print(
            f"the loop at {args.device_seconds * 1000:g} ms of device time a step, "
            f"{'batches from the worker process' if worker else 'batches made in the loop'}: "
            f"{statistics.median(r['tokens_per_second'] for r in rounds):,.0f} tokens/s, "
            f"{statistics.median(r['waited'] for r in rounds):.2f} s waited in {args.steps} steps"
        )


if __name__ == "__main__":
    main()
