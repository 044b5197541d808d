"""Packed sequences: time-major rows, sorted by length, no padding.

Sequences arrive sorted by length (longest first), so step ``t`` owns the
contiguous rows ``offsets[t] : offsets[t] + batch_sizes[t]`` and no work is
spent on padding. Direction 0 reads each sequence forwards, direction 1 reads it
reversed; both share one plan.
"""
from dataclasses import dataclass
from typing import Sequence, Tuple

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
