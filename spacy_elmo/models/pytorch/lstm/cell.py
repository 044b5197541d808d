"""The reference LSTM: TensorFlow's ``LSTMCell`` with projection and clipping, step by step.

Gate blocks are kept in the order ``i, f, o, j`` so that one sigmoid covers three (the original files' ``i, j, f, o``
is permuted on load); the forget gate's bias gets + 1. Tensors carry ``k`` directions in front: the backward one reads
each sequence reversed, over the same packed rows.
"""
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

#: ``(h, c)`` for one layer, *Shape:* ``(k, batch, P)`` and ``(k, batch, H)``
#: for ``k`` directions; index 0 is the forward direction.
LstmState = Tuple[Tensor, Tensor]


@dataclass(frozen=True)
class PackingPlan:
    """How many sequences are still running at each step, and where each step starts."""

    batch_sizes: Tuple[int, ...]
    offsets: Tuple[int, ...]

    @classmethod
    def from_sorted_lengths(cls, lengths: Sequence[int]) -> "PackingPlan":
        """:param lengths: number of steps per sequence, longest first."""
        n_steps = lengths[0] if lengths else 0
        batch_sizes, offsets, n, total = [], [], len(lengths), 0
        for t in range(n_steps):
            while lengths[n - 1] <= t:
                n -= 1
            batch_sizes.append(n)
            offsets.append(total)
            total += n
        return cls(tuple(batch_sizes), tuple(offsets))

    @property
    def n_rows(self) -> int:
        return sum(self.batch_sizes)


@dataclass(frozen=True)
class DistinctInputs:
    """The first layer's inputs as rows of a table: ``inputs[d] == vectors[index[d]]``.

    ``vectors``: *Shape:* ``(n_distinct, P)``, one row per distinct token of the
    batch; ``index``: *Shape:* ``(2, n_rows)``. Prediction may compute the first
    layer's input product once per distinct row and gather it for each step.
    """

    vectors: Tensor
    index: Tensor


#: ``product(add, x, weight)``: ``add + x @ weight`` per direction, *Shape:*
#: ``(k, rows, in) @ (k, in, out)``; ``add`` is ``None``, a bias ``(k, 1, out)``
#: or a tensor of the product's shape. A fast path passes its own.
Product = Callable[[Optional[Tensor], Tensor, Tensor], Tensor]


@dataclass(frozen=True)
class Clips:
    """The cell and projection clips (``None``: no clip)."""

    cell: Optional[float]
    projection: Optional[float]


@dataclass(frozen=True)
class LayerWeights:
    """One layer's weights for ``k`` directions.

    ``input``, ``hidden``: *Shape:* ``(k, P, 4H)``; ``bias``: ``(k, 4H)``, the
    forget gate's +1 included; ``projection``: ``(k, H, P)``.
    """

    input: Tensor
    hidden: Tensor
    bias: Tensor
    projection: Tensor

    def directions(self, which: slice) -> "LayerWeights":
        return LayerWeights(self.input[which], self.hidden[which], self.bias[which], self.projection[which])


def affine(add: Optional[Tensor], x: Tensor, weight: Tensor) -> Tensor:
    """The plain :data:`Product`: batched over directions, MKL's GEMV at one direction and row."""
    if x.shape[0] == 1:
        if add is None:
            return torch.mm(x[0], weight[0]).unsqueeze(0)
        return torch.addmm(add[0], x[0], weight[0]).unsqueeze(0)
    if add is None:
        return torch.bmm(x, weight)
    return torch.baddbmm(add, x, weight)


def lstm_cell(
    gate_inputs: Tensor,
    state: Optional[LstmState],
    weights: LayerWeights,
    clips: Clips,
    product: Product = affine,
) -> LstmState:
    """One time step for the ``n`` sequences still running; returns the new ``h`` and ``c``.

    `gate_inputs`: ``x_t W + b``, *Shape:* ``(k, n, 4H)``. `state`: ``h`` ``(k, n, P)`` and ``c`` ``(k, n, H)``
    after the previous step, or ``None`` at the first step (zeros).
    """
    hidden_size = weights.projection.shape[1]
    gates = gate_inputs if state is None else product(gate_inputs, state[0], weights.hidden)
    input_gate, forget_gate, output_gate = torch.sigmoid(gates[..., : 3 * hidden_size]).chunk(3, dim=-1)
    candidate = torch.tanh(gates[..., 3 * hidden_size :])
    cell = input_gate * candidate
    if state is not None:
        cell = torch.addcmul(cell, forget_gate, state[1])
    if clips.cell is not None:
        cell = cell.clamp(-clips.cell, clips.cell)
    hidden = product(None, output_gate * torch.tanh(cell), weights.projection)
    if clips.projection is not None:
        hidden = hidden.clamp(-clips.projection, clips.projection)
    return hidden, cell


def run_steps(
    gate_inputs: Iterable[Tensor],
    plan: PackingPlan,
    weights: LayerWeights,
    clips: Clips,
    state: Optional[LstmState] = None,
    product: Product = affine,
) -> Tuple[Tensor, LstmState]:
    """Run :func:`lstm_cell` over every step of a packed layer.

    :param gate_inputs: per step ``t``, *Shape:* ``(k, batch_sizes[t], 4H)``.
    :param state: every sequence's initial ``(h, c)`` in sorted order, or ``None`` (zeros).
    :returns: the outputs ``(k, n_rows, P)`` and every sequence's final ``(h, c)``.
    """
    outputs: List[Tensor] = []
    finished: List[LstmState] = []
    sizes = plan.batch_sizes
    for t, step_inputs in enumerate(gate_inputs):
        n = sizes[t]
        state = lstm_cell(step_inputs, None if state is None else (state[0][:, :n], state[1][:, :n]),
                          weights, clips, product)
        outputs.append(state[0])
        n_next = sizes[t + 1] if t + 1 < len(sizes) else 0
        if n_next < n:  # sequences n_next .. n-1 end at this step
            finished.append((state[0][:, n_next:], state[1][:, n_next:]))
    finished.reverse()
    final_h = torch.cat([h for h, _ in finished], dim=1)
    final_c = torch.cat([c for _, c in finished], dim=1)
    return torch.cat(outputs, dim=1), (final_h, final_c)


def reference_layer(
    inputs: Tensor, plan: PackingPlan, weights: LayerWeights, clips: Clips, state: Optional[LstmState] = None,
) -> Tuple[Tensor, LstmState]:
    """One layer, every op under autograd: the oracle, and the path of training under autocast.

    :param inputs: *Shape:* ``(k, n_rows, P)``, packed as `plan` says.
    """
    gate_inputs = torch.baddbmm(weights.bias.unsqueeze(1), inputs, weights.input)
    return run_steps(gate_inputs.split(plan.batch_sizes, dim=1), plan, weights, clips, state)
