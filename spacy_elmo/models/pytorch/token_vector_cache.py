"""Each word's token vector once, while the character encoder's weights stay fixed.

The token layer (character CNN, highway, projection) gives a word the same
vector wherever it occurs, so in prediction a word seen before needs no CNN:
its vector is looked up by its character ids. The cache is bounded (least
recently used words leave first) and serves one encoder with one set of
weights: another encoder, or changed weights (an in-place torch update,
``load_state_dict``, or :meth:`CharacterEncoder.weights_changed` after an
update torch cannot see), empties it before use.
"""
import weakref
from collections import OrderedDict
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from .char_cnn import CharacterEncoder

_FIRST_CAPACITY = 1024


class TokenVectorCache:
    """Token vectors *Shape:* ``(projection_dim,)`` keyed by a word's ids (its 50 character ids).

    :param max_words: the most words kept (0: no caching).
    """

    def __init__(self, max_words: int) -> None:
        if max_words < 0:
            raise ValueError(f"max_words must be 0 (off) or more, got {max_words}")
        self.max_words = max_words
        self.hits = self.misses = 0
        self._slots: "OrderedDict[bytes, int]" = OrderedDict()
        self._vectors: Optional[Tensor] = None
        self._encoder: Optional[weakref.ReferenceType] = None
        self._fingerprint: Optional[Tuple] = None

    def __len__(self) -> int:
        return len(self._slots)

    def clear(self) -> None:
        self._slots.clear()
        self._vectors = None
        self._encoder = self._fingerprint = None
        self.hits = self.misses = 0

    def token_vectors(self, encoder: CharacterEncoder, char_ids: Tensor) -> Tensor:
        """``encoder(char_ids)``, computing only the words not seen before.

        :param char_ids: *Shape:* ``(n_words, token_width)``, distinct rows.
        :returns: *Shape:* ``(n_words, projection_dim)``.

        Only for prediction: the result carries no gradient.
        """
        if self.max_words == 0 or torch.is_grad_enabled() or any(p.is_inference() for p in encoder.parameters()):
            # Inference tensors (weights made under inference_mode) have no version counter to watch.
            return encoder(char_ids)
        self._serve(encoder)
        keys = [row.tobytes() for row in char_ids.to(torch.int32).cpu().numpy()]
        hit_rows, hit_slots, miss_rows = [], [], []
        for row, key in enumerate(keys):
            slot = self._slots.get(key)
            if slot is None:
                miss_rows.append(row)
            else:
                self._slots.move_to_end(key)
                hit_rows.append(row)
                hit_slots.append(slot)
        self.hits += len(hit_rows)
        self.misses += len(miss_rows)
        if not hit_rows:
            computed = encoder(char_ids)
            self._store([keys[row] for row in miss_rows], computed)
            return computed
        device = char_ids.device
        assert self._vectors is not None
        vectors = self._vectors.new_empty((len(keys), self._vectors.shape[1]))
        vectors[torch.tensor(hit_rows, device=device)] = self._vectors[torch.tensor(hit_slots, device=device)]
        if miss_rows:
            misses = torch.tensor(miss_rows, device=device)
            computed = encoder(char_ids.index_select(0, misses))
            vectors[misses] = computed
            self._store([keys[row] for row in miss_rows], computed)
        return vectors

    def _serve(self, encoder: CharacterEncoder) -> None:
        """Empty the cache unless it holds vectors of this encoder's current weights."""
        fingerprint = (
            encoder.generation,
            _autocast_enabled(next(encoder.parameters()).device.type),
            tuple((p.data_ptr(), p._version, p.dtype, p.device) for p in encoder.parameters()),
        )
        current = self._encoder() if self._encoder is not None else None
        if current is not encoder or fingerprint != self._fingerprint:
            self.clear()
            self._encoder = weakref.ref(encoder)
            self._fingerprint = fingerprint

    def _store(self, keys: List[bytes], vectors: Tensor) -> None:
        """Add new words, reusing the least recently used slots when full."""
        keys, vectors = keys[-self.max_words :], vectors[-self.max_words :]
        slots = []
        for key in keys:
            if len(self._slots) < self.max_words:
                slot = len(self._slots)
            else:
                _, slot = self._slots.popitem(last=False)
            self._slots[key] = slot
            slots.append(slot)
        self._reserve(len(self._slots), vectors)
        assert self._vectors is not None
        self._vectors[torch.tensor(slots, device=vectors.device)] = vectors

    def _reserve(self, n_slots: int, like: Tensor) -> None:
        """Room for ``n_slots`` vectors like ``like``'s rows, doubling up to ``max_words``."""
        capacity = 0 if self._vectors is None else self._vectors.shape[0]
        if n_slots > capacity:
            grown = like.new_empty((min(max(2 * capacity, _FIRST_CAPACITY, n_slots), self.max_words), like.shape[1]))
            if self._vectors is not None:
                grown[:capacity] = self._vectors
            self._vectors = grown

    def __reduce__(self):
        # A copy (another process, a deep copy) starts empty.
        return (TokenVectorCache, (self.max_words,))


def _autocast_enabled(device_type: str) -> bool:
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4 has one flag per device kind
        return torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled()
