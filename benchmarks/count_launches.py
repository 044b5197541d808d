"""Kernel launches per pretraining step and per prediction batch, counted on the CPU.

Every op torch dispatches to a kernel is counted (views and other ops that only
describe memory are not): on a GPU each is a launch, a few microseconds of host time
whatever its size, so their number bounds a step that the device finishes quickly.
The softmax is chunked as on a GPU. The counts depend on the code and the batch's
shape (its longest sentence: the LSTM's time steps), not on the machine, so two
checkouts compare in one run:

    python benchmarks/count_launches.py
    (cd ../before && PYTHONPATH=$PWD python $OLDPWD/benchmarks/count_launches.py)   # an earlier version
    python benchmarks/count_launches.py --fused   # the LSTM in the fused Triton layer, as on a GPU

With ``--fused`` the LSTM's layers take the path a GPU with Triton takes under
``SPACY_ELMO_GPU_TRAIN_LAYER=fused`` and ``SPACY_ELMO_GPU_LAYER=fused``, run here by
Triton's interpreter on CPU tensors (slow: a minute or more); each Triton kernel counts as
one launch, and the torch ops the interpreter runs inside it are not counted.
"""
import argparse
import collections
import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Counter, Dict

import numpy
import torch
from torch.utils._python_dispatch import TorchDispatchMode

if "--fused" in sys.argv:  # before triton.language is imported
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["SPACY_ELMO_GPU_TRAIN_LAYER"] = os.environ["SPACY_ELMO_GPU_LAYER"] = "fused"

from spacy_elmo.models.pytorch.lstm import fused_layer, stack
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
        self.paused = False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        if name not in NO_KERNEL and not self.paused:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


COUNTING: Dict[str, CountKernels] = {}


class _CountedKernel:
    """A Triton kernel that counts as one launch, and whose interpreter's torch ops are not counted."""

    def __init__(self, name: str, kernel: Any) -> None:
        self.name, self.kernel = name, kernel

    def __getitem__(self, grid: Any):
        def launch(*args: Any, **kwargs: Any) -> Any:
            counter = COUNTING.get("now")
            if counter is None:
                return self.kernel[grid](*args, **kwargs)
            counter.ops[f"triton {self.name}"] += 1
            counter.paused = True
            try:
                return self.kernel[grid](*args, **kwargs)
            finally:
                counter.paused = False
        return launch


@contextlib.contextmanager
def fused_lstm_on_cpu():
    """The LSTM's layers on the fused path, as on a GPU with Triton (its interpreter runs them here)."""
    kernels = fused_layer._kernels()
    counted = type("CountedKernels", (), {
        name: _CountedKernel(name, getattr(kernels, name)) for name in ("lstm_layer", "lstm_layer_backward")
    })
    saved = fused_layer._kernels, stack.gpu_layer_choice
    fused_layer._kernels = lambda: counted
    stack.gpu_layer_choice = lambda inputs: fused_layer.fused_layer_available(inputs.device)
    try:
        yield
    finally:
        fused_layer._kernels, stack.gpu_layer_choice = saved


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
    counter = CountKernels()
    COUNTING["now"] = counter
    try:
        with counter:
            run()
    finally:
        COUNTING.pop("now")
    return {"launches": sum(counter.ops.values()), "top": counter.ops.most_common(8)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens-per-step", type=int, default=16384)
    parser.add_argument("--longest", type=int, default=40, help="words in the longest sentence")
    parser.add_argument("--batch-size", type=int, default=256, help="sentences per prediction batch")
    parser.add_argument("--fused", action="store_true", help="the LSTM in the fused Triton layer (see above)")
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
    with fused_lstm_on_cpu() if args.fused else contextlib.nullcontext():
        training = count(lambda: trainer.step(trainer.with_negatives(trainer.prepare(batch))))
        with torch.inference_mode():
            prediction = count(lambda: bilm(bilm.prepare(predicted)))
    shape = f"longest sentence {len(batch[-1])} words" + (", the LSTM in the fused layer" if args.fused else "")
    print(f"pretraining step, compact, {sum(len(s) + 1 for s in batch):,} tokens, {shape}: {training['launches']:,} launches")
    print(f"  most: {training['top']}")
    print(f"prediction batch, english-compact, {len(predicted)} sentences, {shape}: {prediction['launches']:,} launches")
    print(f"  most: {prediction['top']}")


if __name__ == "__main__":
    main()
