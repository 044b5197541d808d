"""Which path a :class:`~.lstm.BiLstmStack` call takes.

Training runs each layer as one autograd node (:func:`~.lstm_recurrence.lstm_recurrence`),
which on a CPU runs the two directions on two threads; prediction runs step by
step, each direction on its own thread only where its per-step products are large,
and the first layer's input product once per distinct token where its weights are.
"""
from contextlib import contextmanager
from typing import Iterable, Iterator

import torch
from torch import Tensor

# In prediction the directions go to their own threads only where each step's
# products are large: for smaller weights, handing Python's GIL between the
# threads at every op costs more than the second core gives, and one batched
# product for both directions is faster (measured on a 2-core AMD EPYC:
# english-compact 1.7x at batch 1, 1.8x at batch 4, even at 32; `original`, 4096
# cells: threads 2.2x faster at batch 4, 1.2x at 32, 1.06x at 1).
_MIN_STEP_WEIGHTS_FOR_THREADS = 2_000_000

# In CPU prediction the first layer's input product goes over the batch's distinct
# token vectors only where its weights are this large: for smaller ones the per-step
# gather costs what the product saves (2-core Intel Xeon, EWT batches of 32, tokens/s
# against the chunked product: `original` +6% in fp32, +16% in int8; `small` +5%;
# `english-compact`'s 128 x 2048 -4%; docs/results/speed.md).
_MIN_INPUT_WEIGHTS_FOR_TABLE = 500_000

_autograd_only = False


@contextmanager
def autograd_recurrence() -> Iterator[None]:
    """Train through the per-step autograd graph instead of :func:`lstm_recurrence`
    (the reference for tests and benchmarks). Process-wide, not thread-local."""
    global _autograd_only
    before, _autograd_only = _autograd_only, True
    try:
        yield
    finally:
        _autograd_only = before


def trains_through_recurrence(inputs: Tensor, parameters: Iterable[Tensor]) -> bool:
    """Whether this call trains, so that :func:`lstm_recurrence` runs the layers.

    Not under autocast: the per-step path computes its products in autocast's
    dtype, the recurrence would not (left to a later change).
    """
    return (
        not _autograd_only
        and not torch.is_autocast_enabled(inputs.device.type)
        and _needs_gradients(inputs, parameters)
    )


def first_layer_over_distinct_rows(
    inputs: Tensor, parameters: Iterable[Tensor], input_weights: int, n_distinct: int, max_rows: int
) -> bool:
    """In CPU prediction, whether the first layer's input product runs once per
    distinct token vector (`n_distinct` of them, at most `max_rows`) instead of
    once per row of ``inputs`` *Shape:* ``(k, n_rows, P)``.

    :param input_weights: the elements of one direction's first-layer input weights.
    """
    return (
        inputs.device.type == "cpu"
        and input_weights >= _MIN_INPUT_WEIGHTS_FOR_TABLE
        and n_distinct < inputs.shape[1]
        and n_distinct <= max_rows
        and not _needs_gradients(inputs, parameters)
    )


def _needs_gradients(inputs: Tensor, parameters: Iterable[Tensor]) -> bool:
    return torch.is_grad_enabled() and (inputs.requires_grad or any(p.requires_grad for p in parameters))


def threads_in_training(inputs: Tensor, parallel_directions: bool) -> bool:
    """In training, whether :func:`lstm_recurrence` runs each direction on its own thread."""
    return _two_cpu_threads(inputs, parallel_directions)


def threads_in_prediction(inputs: Tensor, parallel_directions: bool, step_weights: int) -> bool:
    """In prediction, whether each direction runs on its own thread (through the
    prepacked single-direction products).

    :param step_weights: the weights one direction multiplies at each step.
    """
    return _two_cpu_threads(inputs, parallel_directions) and step_weights >= _MIN_STEP_WEIGHTS_FOR_THREADS


def _two_cpu_threads(inputs: Tensor, parallel_directions: bool) -> bool:
    return inputs.device.type == "cpu" and torch.get_num_threads() >= 2 and parallel_directions
