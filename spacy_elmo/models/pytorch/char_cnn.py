"""Context-independent token vectors: char embedding -> CNN -> highway -> projection.

An ELMoForManyLangs model adds a word embedding beside the highway's output. :class:`TokenVectorCache` is bounded (LRU)
and serves one encoder with one set of weights: another encoder, or changed weights (in place, ``load_state_dict``, or
:meth:`CharacterEncoder.weights_changed` after an update torch cannot see), empties it before use.
"""
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import List, Optional, Tuple, Union

import numpy
import torch
from torch import Tensor, nn

from .char_ids import PAD_CHAR
from .devices import DeviceLike, autocast_enabled, to_device
from .options import BiLMOptions
from .prepacked_linear import PrepackedWeights
from .token_groups import GroupedTokens

# Above this many distinct tokens MKL multiplies the highway matrices faster.
_PREPACKED_MAX_ROWS = 256
class CharacterEncoder(nn.Module):
    """Turns the character ids of each token into one token vector.

    Parameters keep the original layout (matrices as ``(in, out)``), so converting to and from `weights.hdf5` is
    exact. `pad_id`: the padding character's id; `word_columns`: 1 when each token's ids start with a word id.
    """

    def __init__(self, options: BiLMOptions, *, pad_id: int = PAD_CHAR + 1, word_columns: int = 0) -> None:
        super().__init__()
        self.pad_id = pad_id
        self.word_columns = word_columns
        self.word_embedding = (
            nn.Parameter(torch.zeros(options.n_words, options.word_embedding_dim))
            if options.word_embedding_dim else None
        )
        self.activation = torch.relu if options.activation == "relu" else torch.tanh
        dim = options.char_embedding_dim
        # Row 0 stays zero: id 0 is a padded token (ids are offset by +1).
        self.char_embedding = nn.Parameter(torch.zeros(options.n_characters, dim))
        self.convolutions = nn.ModuleList(
            nn.Conv1d(dim, count, kernel_size=width) for width, count in options.filters
        )
        width = self.n_filters = options.n_filters
        # Highway layer k: columns [transform | carry] of x @ W + b.
        self.highway_weights = nn.ParameterList(
            nn.Parameter(torch.zeros(width, 2 * width)) for _ in range(options.n_highway)
        )
        self.highway_biases = nn.ParameterList(
            nn.Parameter(torch.zeros(2 * width)) for _ in range(options.n_highway)
        )
        self.projection = (
            nn.Linear(options.token_features, options.projection_dim) if options.has_char_projection else None
        )
        self._prepacked = PrepackedWeights()
        self.generation = 0
        self.reset_parameters()

    def weights_changed(self) -> None:
        """Forget what was derived from the weights (prepacked matrices), and
        count the change for caches of this encoder's outputs. In-place torch
        updates are seen without this; Thinc's optimizer is not."""
        self._prepacked.clear()
        self.generation += 1

    def reset_parameters(self) -> None:
        """Random initialisation for training from scratch (bilm-tf's recipe)."""
        with torch.no_grad():
            nn.init.uniform_(self.char_embedding, -1.0, 1.0)
            self.char_embedding[0].zero_()
            if self.word_embedding is not None:
                nn.init.normal_(self.word_embedding, 0.0, 1.0)
            for conv in self.convolutions:
                nn.init.normal_(conv.weight, 0.0, (1.0 / conv.weight.shape[1] / conv.weight.shape[2]) ** 0.5)
                nn.init.zeros_(conv.bias)
            for weight, bias in zip(self.highway_weights, self.highway_biases):
                width = weight.shape[0]
                nn.init.normal_(weight, 0.0, (1.0 / width) ** 0.5)
                bias[:width].zero_()
                bias[width:].fill_(-2.0)  # carry gate starts mostly closed
            if self.projection is not None:
                nn.init.normal_(self.projection.weight, 0.0, (1.0 / self.projection.in_features) ** 0.5)
                nn.init.zeros_(self.projection.bias)

    def grouped(self, char_ids: Tensor) -> GroupedTokens:
        """`char_ids` with their groups by length, on their device (ids on a device are
        read back to the host first: a synchronisation, which callers avoid by grouping the
        host's ids with :meth:`GroupedTokens.of`)."""
        host = char_ids.cpu().numpy()
        return GroupedTokens.of(host, pad_id=self.pad_id, word_columns=self.word_columns).to(char_ids.device)

    def forward(self, char_ids: Union[Tensor, GroupedTokens]) -> Tensor:
        """:param char_ids: *Shape:* ``(n_tokens, word_columns + max_chars)``, integer; or
            the same grouped by length on the host.
        :returns: token vectors, *Shape:* ``(n_tokens, projection_dim)``, in the order of the ids.
        """
        tokens = char_ids if isinstance(char_ids, GroupedTokens) else self.grouped(char_ids)
        features = self._filter_features(tokens)
        width = features.shape[1]
        for k, (weight, bias) in enumerate(zip(self.highway_weights, self.highway_biases)):
            projected = self._prepacked.matmul(features, weight, (k,), bias=bias, max_rows=_PREPACKED_MAX_ROWS)
            if projected is None:
                projected = torch.addmm(bias, features, weight)
            transform = torch.relu(projected[:, :width])
            gate = torch.sigmoid(projected[:, width:])
            features = gate * transform + (1.0 - gate) * features
        if self.word_embedding is not None:
            features = torch.cat([nn.functional.embedding(tokens.ids[:, 0], self.word_embedding), features], dim=1)
        if self.projection is not None:
            features = self.projection(features)
        return features

    def _filter_features(self, char_ids: Union[Tensor, GroupedTokens]) -> Tensor:
        """Every filter bank's max-pooled response, with no work on padding; *Shape:* ``(n_tokens, n_filters)``.

        A window wholly in padding gives every token the same response, computed once (``_padding_responses``). Tokens
        are sorted by length and convolved in groups over the windows touching the group's longest token; the max over
        those and the padding response is the max over all positions. Rows keep the order of the ids."""
        tokens = char_ids if isinstance(char_ids, GroupedTokens) else self.grouped(char_ids)
        char_columns = tokens.ids[:, self.word_columns :]
        sorted_ids = char_columns if tokens.order is None else char_columns.index_select(0, tokens.order)
        padding = self._padding_responses()
        groups, start = [], 0
        for end, longest in zip(tokens.ends, tokens.longest):
            chars = nn.functional.embedding(sorted_ids[start:end], self.char_embedding)
            groups.append(
                torch.cat(
                    [self._max_pooled(chars, longest, conv, pad) for conv, pad in zip(self.convolutions, padding)],
                    dim=1,
                )
            )
            start = end
        if len(groups) == 1:
            features = groups[0]
        else:
            features = torch.cat(groups) if groups else self.char_embedding.new_zeros((0, self.n_filters))
        if tokens.restore is not None:
            features = features.index_select(0, tokens.restore)
        return features

    def _padding_responses(self) -> List[Tensor]:
        """Per filter bank, the response of a window of padding characters
        (bias excluded), *Shape:* ``(n_filters_of_this_width,)``."""
        pad = self.char_embedding[self.pad_id]
        responses = []
        for conv in self.convolutions:
            window = pad[:, None].expand(-1, conv.kernel_size[0]).reshape(1, -1)
            responses.append(torch.matmul(window, conv.weight.reshape(conv.out_channels, -1).T)[0])
        return responses

    def _max_pooled(self, chars: Tensor, longest: int, conv: nn.Conv1d, padding: Tensor) -> Tensor:
        """One filter bank: VALID convolution, max over positions, activation; *Shape:* ``(n_tokens, n_filters)``.

        `chars`: ``(n_tokens, max_chars, char_embedding_dim)``, tokens of at most ``longest`` characters. Only windows
        starting inside the longest token are multiplied, as one matmul (1.5x faster on CPU than ``conv1d``); a skipped
        padding response joins the max. Bias after the max (rounding is monotone): the big matrix is written once."""
        n_tokens, n_positions, dim = chars.shape
        width = conv.kernel_size[0]
        n_windows = min(longest, n_positions - width + 1)
        windows = chars[:, : n_windows + width - 1].unfold(1, width, 1).reshape(n_tokens, n_windows, dim * width)
        responses = torch.matmul(windows, conv.weight.reshape(conv.out_channels, -1).T)
        best = responses.amax(dim=1)
        if n_windows < n_positions - width + 1:
            best = torch.maximum(best, padding)
        return self.activation(best + conv.bias)


_FIRST_CAPACITY = 1024


@dataclass(frozen=True)
class CacheLookup:
    """What the host found in a :class:`TokenVectorCache` for a batch's distinct tokens.

    ``hit_rows``: the rows it holds, ``hit_slots`` where; ``misses``: the other rows' ids, grouped for the encoder,
    ``miss_rows`` which rows they are; ``stored_slots``: where the last ``len(stored_slots)`` misses' vectors go;
    ``capacity``: the slots the cache needs. Index tensors *Shape:* ``(n,)``, int32."""

    n_tokens: int
    hit_rows: Tensor
    hit_slots: Tensor
    misses: GroupedTokens
    miss_rows: Tensor
    stored_slots: Tensor
    capacity: int

    def to(self, device: DeviceLike) -> "CacheLookup":
        return CacheLookup(
            self.n_tokens, to_device(self.hit_rows, device), to_device(self.hit_slots, device),
            self.misses.to(device), to_device(self.miss_rows, device), to_device(self.stored_slots, device),
            self.capacity,
        )


class TokenVectorCache:
    """Token vectors *Shape:* ``(projection_dim,)`` keyed by a word's ids (its 50 character ids).

    Keys live on the host: :meth:`lookup` finds a batch's words from the host's ids, before the copy to the device,
    and :meth:`vectors` does the device's part (gather, compute and keep the misses) without reading anything back.
    `max_words`: the most words kept (0: no caching)."""

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

    def lookup(self, encoder: CharacterEncoder, ids: numpy.ndarray) -> Optional[CacheLookup]:
        """The host's part: which of the distinct rows `ids` *Shape:* ``(n_words, token_width)``
        the cache holds, and the slots of the new ones (the least recently used words
        leave first); ``None`` where it does not serve (gradients, ``max_words`` 0)."""
        if self.max_words == 0 or torch.is_grad_enabled() or any(p.is_inference() for p in encoder.parameters()):
            # Inference tensors (weights made under inference_mode) have no version counter to watch.
            return None
        self._serve(encoder)
        keys = [row.tobytes() for row in ids.astype(numpy.int32)]
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
        stored_slots = []
        for row in miss_rows[-self.max_words :]:
            if len(self._slots) < self.max_words:
                slot = len(self._slots)
            else:
                _, slot = self._slots.popitem(last=False)
            self._slots[keys[row]] = slot
            stored_slots.append(slot)
        misses = GroupedTokens.of(ids[miss_rows], pad_id=encoder.pad_id, word_columns=encoder.word_columns)
        return CacheLookup(
            len(keys), _int32(hit_rows), _int32(hit_slots), misses, _int32(miss_rows), _int32(stored_slots),
            len(self._slots),
        )

    def vectors(self, encoder: CharacterEncoder, lookup: CacheLookup) -> Tensor:
        """The device's part: the looked-up words' vectors *Shape:* ``(n_words, projection_dim)``,
        the cached ones gathered, the new ones computed and kept."""
        try:
            if len(lookup.hit_rows) == 0:
                vectors = computed = encoder(lookup.misses)
            else:
                assert self._vectors is not None
                vectors = self._vectors.new_empty((lookup.n_tokens, self._vectors.shape[1]))
                vectors[lookup.hit_rows] = self._vectors[lookup.hit_slots]
                if len(lookup.miss_rows):
                    computed = encoder(lookup.misses)
                    vectors[lookup.miss_rows] = computed
            if len(lookup.stored_slots):
                self._reserve(lookup.capacity, computed)
                assert self._vectors is not None
                self._vectors[lookup.stored_slots] = computed[len(computed) - len(lookup.stored_slots) :]
        except BaseException:
            self.clear()  # the keys were given slots whose vectors never came
            raise
        return vectors

    def _serve(self, encoder: CharacterEncoder) -> None:
        """Empty the cache unless it holds vectors of this encoder's current weights."""
        fingerprint = (
            encoder.generation,
            autocast_enabled(next(encoder.parameters()).device.type),
            tuple((p.data_ptr(), p._version, p.dtype, p.device) for p in encoder.parameters()),
        )
        current = self._encoder() if self._encoder is not None else None
        if current is not encoder or fingerprint != self._fingerprint:
            self.clear()
            self._encoder = weakref.ref(encoder)
            self._fingerprint = fingerprint

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


def _int32(values: List[int]) -> Tensor:
    return torch.tensor(values, dtype=torch.int32)
