"""A batch of the biLM as the host prepares it, before one copy to the device.

Everything whose size or place depends on the ids' values is found here, with NumPy, so the device never hands a value
back (on a GPU, a synchronisation). Indices travel as int32, token ids as int16 where they fit.
"""
from dataclasses import dataclass
from typing import Optional

import numpy
import torch
from torch import Tensor

from .char_cnn import CacheLookup, GroupedTokens
from .char_ids import BatchWords, TokenIds, distinct_rows
from .devices import DeviceLike, to_device
from .lstm import PackingPlan


@dataclass(frozen=True)
class HostBatch:
    """The biLM's input with everything the host found in it.

    ``mask`` *Shape:* ``(batch, max_tokens)``: True at real tokens. ``tokens``: the
    distinct tokens of the batch and ``<S>``, ``</S>`` in ascending order of their
    ids (the token table's rows). ``token_index`` ``(batch, max_tokens + 2)``: each position's row
    of the table over ``<S> tokens... </S>``. ``plan``: the LSTM's packing (``n + 1``
    steps for a sentence of ``n`` tokens). Packed row ``k`` belongs to sentence
    ``rows[k]`` ``(n_rows,)``, at positions ``positions[:, k]`` ``(2, n_rows)``
    (forward, backward) whose tokens are ``input_index[:, k]`` ``(2, n_rows)``.
    ``output_index`` ``(2, batch, max_tokens)``: each token's packed row per
    direction (``n_rows`` at padding). ``lookup``: a token cache's part, in prediction.
    """

    mask: Tensor
    tokens: GroupedTokens
    token_index: Tensor
    plan: PackingPlan
    rows: Tensor
    positions: Tensor
    input_index: Tensor
    output_index: Tensor
    lookup: Optional[CacheLookup] = None

    @classmethod
    def of(cls, char_ids: Tensor, token_ids: TokenIds) -> "HostBatch":
        """The batch of `char_ids` *Shape:* ``(batch, max_tokens, token_width)``, the host's
        ids (ids on a device are read back first: a synchronisation)."""
        ids = char_ids.cpu().numpy()
        mask = (ids > 0).any(axis=2)
        return cls._of_rows(mask, ids[mask], token_ids)

    @classmethod
    def of_words(cls, words: "BatchWords", token_ids: TokenIds) -> "HostBatch":
        """The batch of tokenised sentences (their :class:`BatchWords`): each distinct word's
        ids are made once, the same batch as :meth:`of` their ``token_ids.batch``, faster."""
        mask = numpy.arange(words.lengths.max(initial=0))[None, :] < words.lengths[:, None]
        return cls._of_rows(mask, token_ids.rows(words.words), token_ids, words.places)

    @classmethod
    def _of_rows(
        cls, mask: numpy.ndarray, rows: numpy.ndarray, token_ids: TokenIds, places: Optional[numpy.ndarray] = None
    ) -> "HostBatch":
        """The batch whose tokens (where `mask` is True, in order) have the ids ``rows[places]``
        (``places`` None: ``rows`` are the tokens')."""
        batch, max_tokens = mask.shape
        lengths = mask.sum(axis=1)
        boundaries = numpy.asarray(token_ids.boundary_rows, dtype=rows.dtype).reshape(2, -1)
        distinct, inverse = (t.numpy() for t in distinct_rows(torch.from_numpy(numpy.concatenate([boundaries, rows]))))
        tokens = GroupedTokens.of(distinct, pad_id=token_ids.pad_id, word_columns=token_ids.word_columns)
        token_index = numpy.full((batch, max_tokens + 2), inverse[1], dtype=numpy.int32)
        token_index[:, 0] = inverse[0]
        token_index[:, 1:-1][mask] = inverse[2:] if places is None else inverse[2:][places]
        n_steps = lengths + 1
        sorted_order = numpy.argsort(-n_steps, kind="stable")
        sorted_steps = n_steps[sorted_order]
        plan = PackingPlan.from_sorted_lengths(sorted_steps.tolist())
        step, sorted_row = numpy.nonzero(numpy.arange(len(plan.batch_sizes))[:, None] < sorted_steps[None, :])
        rows_of = sorted_order[sorted_row]
        positions = numpy.stack([step, lengths[rows_of] + 1 - step])
        return cls(
            torch.from_numpy(mask), tokens, torch.from_numpy(token_index), plan, _int32(rows_of), _int32(positions),
            torch.from_numpy(token_index[rows_of[None, :], positions]),
            torch.from_numpy(output_places(rows_of, positions, mask)),
        )

    def to(self, device: DeviceLike) -> "HostBatch":
        """The batch on `device`: one copy of each tensor, pinned and non-blocking to a GPU."""
        return HostBatch(
            to_device(self.mask, device), self.tokens.to(device), to_device(self.token_index, device), self.plan,
            to_device(self.rows, device), to_device(self.positions, device), to_device(self.input_index, device),
            to_device(self.output_index, device), None if self.lookup is None else self.lookup.to(device),
        )


def output_places(rows: numpy.ndarray, positions: numpy.ndarray, mask: numpy.ndarray) -> numpy.ndarray:
    """Each token's packed row per direction, *Shape:* ``(2, batch, max_tokens)``, int32, ``n_rows``
    where the sentence has no token (boundary outputs, ``</S>`` backward for one, land nowhere).

    :param rows: each packed row's sentence ``(n_rows,)``; `positions`: its positions
        ``(2, n_rows)`` over ``<S> tokens... </S>``; `mask`: ``(batch, max_tokens)``.
    """
    n_rows = len(rows)
    places = numpy.full((2, *mask.shape), n_rows, dtype=numpy.int32)
    packed = numpy.arange(n_rows, dtype=numpy.int32)
    lengths = mask.sum(axis=1)[rows]
    for direction in (0, 1):
        position = positions[direction]
        token = (position >= 1) & (position <= lengths)
        places[direction, rows[token], position[token] - 1] = packed[token]
    return places


def _int32(array: numpy.ndarray) -> Tensor:
    return torch.from_numpy(numpy.ascontiguousarray(array, dtype=numpy.int32))
