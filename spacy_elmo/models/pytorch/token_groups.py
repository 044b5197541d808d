"""The character CNN's plan for a set of tokens, found by the host from their ids.

Each group of tokens by length is convolved over only the windows that touch its longest token's characters; the host
finds the groups (:meth:`GroupedTokens.of`) before the copy, so the CNN never reads a value back.
"""
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy
import torch
from torch import Tensor

from .char_ids import INT16_MAX
from .devices import DeviceLike, to_device

#: The groups' longest tokens, in characters (then one group of the longer ones).
GROUP_MAX_CHARS = (8, 12, 16, 24)


@dataclass(frozen=True)
class GroupedTokens:
    """Tokens' ids and their groups by length.

    ``ids``: *Shape:* ``(n_tokens, word_columns + max_chars)``, int16 on the host where they fit, int32 once :meth:`to`
    a device; ``order``: the tokens stably sorted by length (``None``: ``ids`` are), ``restore`` its inverse, *Shape:*
    ``(n_tokens,)``; ``ends``: where each group ends in sorted order; ``longest``: each group's longest, in chars."""

    ids: Tensor
    ends: Tuple[int, ...]
    longest: Tuple[int, ...]
    order: Optional[Tensor] = None
    restore: Optional[Tensor] = None

    @classmethod
    def of(cls, ids: numpy.ndarray, *, pad_id: int, word_columns: int) -> "GroupedTokens":
        """The groups of the host's `ids` *Shape:* ``(n_tokens, width)``."""
        n_chars = (ids[:, word_columns:] != pad_id).sum(axis=1)
        order = numpy.argsort(n_chars, kind="stable")
        sorted_n_chars = n_chars[order]
        bounds = numpy.searchsorted(sorted_n_chars, GROUP_MAX_CHARS, side="right").tolist()
        ends = tuple(sorted({end for end in (*bounds, len(order)) if end > 0}))
        longest = tuple(int(sorted_n_chars[end - 1]) for end in ends)
        narrow = ids.astype(numpy.int16 if ids.size == 0 or ids.max() <= INT16_MAX else numpy.int32)
        if (order[1:] > order[:-1]).all():
            return cls(torch.from_numpy(narrow), ends, longest)
        order, restore = order.astype(numpy.int32), numpy.argsort(order).astype(numpy.int32)
        return cls(torch.from_numpy(narrow), ends, longest, torch.from_numpy(order), torch.from_numpy(restore))

    def __len__(self) -> int:
        return self.ids.shape[0]

    def to(self, device: DeviceLike) -> "GroupedTokens":
        return GroupedTokens(
            to_device(self.ids, device).to(torch.int32), self.ends, self.longest, to_device(self.order, device),
            to_device(self.restore, device),
        )
