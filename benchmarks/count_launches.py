"""Kernel launches per pretraining step and per prediction batch, counted on the CPU.

Every op torch dispatches to a kernel is counted (views and other ops that only
describe memory are not): on a GPU each is a launch, a few microseconds of host time
whatever its size, so their number bounds a step that the device finishes quickly.
The softmax is chunked as on a GPU. The counts depend on the code and the batch's
shape (its longest sentence: the LSTM's time steps), not on the machine, so two
checkouts compare in one run:

    python benchmarks/count_launches.py
    (cd ../before && PYTHONPATH=$PWD python $OLDPWD/benchmarks/count_launches.py)   # an earlier version
"""
import argparse
import collections
import tempfile
from pathlib import Path
from typing import Any, Counter, Dict

import numpy
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from spacy_elmo.models.pytorch.original_format import load_bilm
from spacy_elmo.pretraining import softmax as softmax_module
from spacy_elmo.pretraining.assembly import assemble_model
from spacy_elmo.pretraining.config import parse_config
from spacy_elmo.pretraining.default_config import default_config_text
from spacy_elmo.pretraining.processes import Processes
from spacy_elmo.pretraining.trainer import Trainer
from spacy_elmo.pretraining.vocab import SPECIAL_TOKENS, Vocabulary

SHIPPED = Path(__file__).parent.parent / "spacy_elmo" / "resources" / "english_compact"
#: Ops that launch no kernel: they only describe memory that exists.
NO_KERNEL = {
    "view", "_unsafe_view", "as_strided", "t", "transpose", "expand", "slice", "select", "unsqueeze", "squeeze",
    "permute", "detach", "alias", "_reshape_alias", "split", "split_with_sizes", "unbind", "chunk", "narrow",
    "reshape", "lift_fresh", "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "unfold",
    "diagonal", "view_as", "_local_scalar_dense", "set_", "resize_",
}


class CountKernels(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        if name not in NO_KERNEL:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


def sentences(n_tokens: int, longest: int, seed: int = 0):
    """Sentences of 10 to `longest` words (Zipfian words over 20,000), about `n_tokens` in all."""
    rng = numpy.random.default_rng(seed)
    words = [f"w{i}" for i in range(20_000)]
    ranks = 1.0 / numpy.arange(1, len(words) + 1)
    batch, total = [], 0
    while total < n_tokens:
        length = int(rng.integers(10, longest + 1))
        batch.append([words[i] for i in rng.choice(len(words), size=length, p=ranks / ranks.sum())])
        total += length + 1
    return sorted(batch, key=len), words


def count(run) -> Dict[str, Any]:
    run()  # a first call builds caches
    with CountKernels() as counter:
        run()
    return {"launches": sum(counter.ops.values()), "top": counter.ops.most_common(8)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens-per-step", type=int, default=16384)
    parser.add_argument("--longest", type=int, default=40, help="words in the longest sentence")
    parser.add_argument("--batch-size", type=int, default=256, help="sentences per prediction batch")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    batch, words = sentences(args.tokens_per_step, args.longest)
    vocab = Vocabulary(list(SPECIAL_TOKENS) + words)
    gpu_chunks = softmax_module.default_chunk_rows(len(vocab), torch.device("cuda", 0))
    softmax_module.default_chunk_rows = lambda vocab_size, device: gpu_chunks  # as on a GPU
    with tempfile.TemporaryDirectory() as tmp:
        config = parse_config(default_config_text(size="compact"), {"paths.train": tmp})
    model = assemble_model(len(vocab), dropout=0.1, options=config.bilm_options())
    trainer = Trainer.from_config(model, vocab, Processes(0, 1, torch.device("cpu")), config)
    bilm = load_bilm(SHIPPED).eval()
    predicted = batch[-args.batch_size:]
    training = count(lambda: trainer.step(trainer.with_negatives(trainer.prepare(batch))))
    with torch.inference_mode():
        prediction = count(lambda: bilm(bilm.prepare(predicted)))
    shape = f"longest sentence {len(batch[-1])} words"
    print(f"pretraining step, compact, {sum(len(s) + 1 for s in batch):,} tokens, {shape}: {training['launches']:,} launches")
    print(f"  most: {training['top']}")
    print(f"prediction batch, english-compact, {len(predicted)} sentences, {shape}: {prediction['launches']:,} launches")
    print(f"  most: {prediction['top']}")


if __name__ == "__main__":
    main()
