"""The output softmax shared by both LM directions: full, or sampled as in bilm-tf.

The sampled softmax follows TensorFlow's ``sampled_softmax_loss`` with a
``LogUniformCandidateSampler`` (unique candidates, accidental hits removed,
logits corrected by the log expected count), so its training loss matches bilm-tf.
"""
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Union

import numpy
import torch
from torch import Tensor, nn

from ..models.pytorch.bilm import select_rows
from ..models.pytorch.original_format import read_hdf5_arrays
from ..models.pytorch.devices import autocast_off, to_device
from ..output_files import HDF5_OVERHEAD_BYTES, atomic_output_path


@dataclass
class SampledCandidates:
    """Negative classes for one batch, drawn without replacement.

    ``ids``: *Shape:* ``(n_samples,)``, int32; ``num_tries``: draws (with replacement)
    it took to collect them, which sets every class's expected count.
    """

    ids: Tensor
    num_tries: int
    vocab_size: int

    def log_expected_count(self, ids: Tensor) -> Tensor:
        """log Q(class): the log of how often a class is expected among the candidates."""
        log_range = math.log(self.vocab_size + 1.0)
        ids = ids.to(torch.float32)
        probability = (torch.log(ids + 2.0) - torch.log(ids + 1.0)) / log_range
        return torch.log(-torch.expm1(self.num_tries * torch.log1p(-probability)))

    def to(self, device: Union[str, torch.device]) -> "SampledCandidates":
        return SampledCandidates(to_device(self.ids, device), self.num_tries, self.vocab_size)


class LogUniformSampler:
    """Zipfian candidate sampler over a frequency-sorted vocabulary: P(k) ∝ log((k+2)/(k+1)).

    Draws with replacement until `n_samples` distinct classes are found (as
    TensorFlow's unique sampler). Runs on the CPU with its own seeded generator,
    whose state goes into checkpoints.
    """

    def __init__(self, vocab_size: int, n_samples: int, *, seed: int = 0) -> None:
        if not 0 < n_samples < vocab_size:
            raise ValueError(
                f"the number of negative samples ({n_samples}) must be between 1 and the "
                f"vocabulary size minus one ({vocab_size - 1})"
            )
        self.vocab_size = vocab_size
        self.n_samples = n_samples
        self.rng = numpy.random.default_rng(seed)

    def sample(self) -> SampledCandidates:
        log_range = math.log(self.vocab_size + 1.0)
        draws = numpy.empty(0, dtype=numpy.int64)
        chunk = 2 * self.n_samples
        while True:
            new = numpy.floor(numpy.exp(self.rng.random(chunk) * log_range)).astype(numpy.int64) - 1
            draws = numpy.concatenate([draws, numpy.clip(new, 0, self.vocab_size - 1)])
            _, first = numpy.unique(draws, return_index=True)
            if len(first) >= self.n_samples:
                first.sort()
                first = first[: self.n_samples]
                ids = torch.from_numpy(draws[first].astype(numpy.int32))
                return SampledCandidates(ids, int(first[-1]) + 1, self.vocab_size)
            chunk *= 2

    def state_dict(self) -> Dict[str, Any]:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]


class LMSoftmax(nn.Module):
    """``log softmax(h @ W.T + b)`` over the vocabulary; W is ``(vocab, dim)`` as in bilm-tf."""

    def __init__(self, vocab_size: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, dim))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            nn.init.normal_(self.weight, 0.0, 1.0 / math.sqrt(self.weight.shape[1]))
            self.bias.zero_()

    @property
    def vocab_size(self) -> int:
        return self.weight.shape[0]

    def nll(
        self, hidden: Tensor, targets: Tensor, candidates: Optional[SampledCandidates] = None,
        *, chunk_rows: int = 0,
    ) -> Tensor:
        """Negative log-likelihood of each target, float32.

        `hidden`: *Shape:* ``(n, dim)``; `targets`: *Shape:* ``(n,)``, word ids; `candidates`: negatives for the sampled
        softmax (``None``: full softmax); `chunk_rows`: softmax rows at a time (0: :func:`default_chunk_rows`).
        """
        if candidates is not None:
            return self._sampled_nll(hidden, targets, candidates, chunk_rows)
        # float32 even under autocast: held-out perplexity must not depend on the precision.
        with autocast_off(hidden.device.type):
            return full_softmax_nll(hidden.float(), targets, self.weight, self.bias, chunk_rows=chunk_rows)

    def _sampled_nll(self, hidden: Tensor, targets: Tensor, candidates: SampledCandidates, chunk_rows: int) -> Tensor:
        # float32 (as the full softmax): under autocast, the products are a small part of a step.
        with autocast_off(hidden.device.type):
            hidden = hidden.float()
            true_logits = (hidden * select_rows(self.weight, targets)).sum(dim=1) + select_rows(self.bias, targets)
            true_logits = true_logits - candidates.log_expected_count(targets)
            sampled_bias = select_rows(self.bias, candidates.ids) - candidates.log_expected_count(candidates.ids)
            rows = chunk_rows if chunk_rows > 0 else default_chunk_rows(len(candidates.ids), hidden.device)
            return _ChunkedSoftmaxNLL.apply(
                hidden, targets, select_rows(self.weight, candidates.ids), sampled_bias, rows,
                _training(hidden, self.weight), true_logits, candidates.ids,
            )


def save_softmax(softmax: LMSoftmax, path: Union[str, Path]) -> None:
    """Write ``softmax/W`` ``(vocab, dim)`` and ``softmax/b`` ``(vocab,)`` (float32 HDF5)."""
    import h5py

    weight = softmax.weight.detach().to("cpu", torch.float32).numpy()
    bias = softmax.bias.detach().to("cpu", torch.float32).numpy()
    with atomic_output_path(path, size=weight.nbytes + bias.nbytes + HDF5_OVERHEAD_BYTES) as tmp:
        with h5py.File(tmp, "w") as handle:
            handle.create_dataset("softmax/W", data=weight)
            handle.create_dataset("softmax/b", data=bias)


def load_softmax(path: Union[str, Path], *, vocab_size: int, dim: int) -> LMSoftmax:
    """Read a softmax written by :func:`save_softmax`, checking it fits the vocabulary and biLM."""
    expected = {"softmax/W": (vocab_size, dim), "softmax/b": (vocab_size,)}
    arrays = read_hdf5_arrays(
        path, expected, f"for a vocabulary of {vocab_size} words and projection dim {dim}"
    )
    softmax = LMSoftmax(vocab_size, dim)
    with torch.no_grad():
        softmax.weight.copy_(torch.from_numpy(arrays["softmax/W"]))
        softmax.bias.copy_(torch.from_numpy(arrays["softmax/b"]))
    return softmax


def full_softmax_nll(hidden: Tensor, targets: Tensor, weight: Tensor, bias: Tensor, *, chunk_rows: int = 0) -> Tensor:
    """``-log softmax(hidden @ weight.T + bias)[targets]``, *Shape:* ``(n,)``, computed
    `chunk_rows` rows at a time (0: :func:`default_chunk_rows`)."""
    rows = chunk_rows if chunk_rows > 0 else default_chunk_rows(weight.shape[0], hidden.device)
    return _ChunkedSoftmaxNLL.apply(hidden, targets, weight, bias, rows, _training(hidden, weight))


def default_chunk_rows(n_classes: int, device: torch.device) -> int:
    """Rows of logits computed at once: on a CPU, rows whose logits (about 4 MB of
    float32) stay in the cache; on a GPU, rows whose logits (512 MB, and two or three
    times that with a chunk's temporaries) keep the device busy, since each chunk
    costs a few kernel launches whatever its size."""
    elements = 1 << 20 if device.type == "cpu" else 1 << 27
    return max(16, elements // n_classes)


_SAVED_PROBABILITIES_MAX_BYTES = 512 * 2**20


class _ChunkedSoftmaxNLL(torch.autograd.Function):
    """``-log softmax(h W^T + b)[target]`` per row, a chunk at a time: the ``(n, classes)`` logits are never all held.

    The forward keeps each row's log-sum-exp; the backward recomputes a chunk's logits as ``softmax - onehot`` in
    place, or reads the probabilities the forward wrote if within ``_SAVED_PROBABILITIES_MAX_BYTES`` (1.1x a step).
    Sampled: ``true_logits`` ``(n,)`` are the targets' logits, outside ``weight``'s classes; accidental hits dropped."""

    @staticmethod
    def forward(
        ctx, hidden: Tensor, targets: Tensor, weight: Tensor, bias: Tensor, chunk_rows: int,
        training: bool, true_logits: Optional[Tensor] = None, candidate_ids: Optional[Tensor] = None,
    ) -> Tensor:
        nll = hidden.new_empty(hidden.shape[0])
        log_norm = hidden.new_empty(hidden.shape[0])
        n_bytes = hidden.shape[0] * weight.shape[0] * hidden.element_size()
        probabilities = hidden.new_empty((hidden.shape[0], weight.shape[0])) if (
            training and n_bytes <= _SAVED_PROBABILITIES_MAX_BYTES
        ) else None
        for start in range(0, hidden.shape[0], chunk_rows):
            rows = slice(start, start + chunk_rows)
            logits = _chunk_logits(hidden, targets, weight, bias, candidate_ids, rows)
            log_norm[rows] = torch.logsumexp(logits, dim=1)
            if true_logits is None:
                nll[rows] = log_norm[rows] - logits.gather(1, targets[rows, None])[:, 0]
            else:
                log_norm[rows] = torch.logaddexp(log_norm[rows], true_logits[rows])
                nll[rows] = log_norm[rows] - true_logits[rows]
            if probabilities is not None:
                torch.sub(logits, log_norm[rows, None], out=probabilities[rows]).exp_()
        ctx.save_for_backward(hidden, targets, weight, bias, log_norm, true_logits, candidate_ids, probabilities)
        ctx.chunk_rows = chunk_rows
        return nll

    @staticmethod
    def backward(ctx, d_nll: Tensor):
        hidden, targets, weight, bias, log_norm, true_logits, candidate_ids, probabilities = ctx.saved_tensors
        d_hidden = torch.empty_like(hidden)
        d_weight = torch.zeros_like(weight)
        d_bias = torch.zeros_like(bias)
        for start in range(0, hidden.shape[0], ctx.chunk_rows):
            rows = slice(start, start + ctx.chunk_rows)
            scale = d_nll[rows, None]
            if probabilities is not None:
                d_logits = probabilities[rows] * scale
            else:
                d_logits = _chunk_logits(hidden, targets, weight, bias, candidate_ids, rows)
                d_logits.sub_(log_norm[rows, None]).exp_().mul_(scale)
            if true_logits is None:
                d_logits.scatter_add_(1, targets[rows, None], -scale)
            torch.mm(d_logits, weight, out=d_hidden[rows])
            d_weight.addmm_(d_logits.T, hidden[rows])
            d_bias.add_(d_logits.sum(dim=0))
        d_true = None
        if true_logits is not None:
            d_true = d_nll * torch.expm1(true_logits - log_norm)
        return d_hidden, None, d_weight, d_bias, None, None, d_true, None


def _training(hidden: Tensor, weight: Tensor) -> bool:
    """Whether a backward pass will follow (so the forward may keep what it needs)."""
    return torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)


def _chunk_logits(
    hidden: Tensor, targets: Tensor, weight: Tensor, bias: Tensor, candidate_ids: Optional[Tensor], rows: slice,
) -> Tensor:
    """One chunk's logits; accidental hits of sampled candidates at -inf."""
    logits = torch.addmm(bias, hidden[rows], weight.T)
    if candidate_ids is not None:
        logits.masked_fill_(targets[rows, None] == candidate_ids[None, :], float("-inf"))
    return logits
