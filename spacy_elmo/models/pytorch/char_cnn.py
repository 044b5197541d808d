"""Context-independent token vectors: char embedding -> CNN -> highway -> projection
(with, for an ELMoForManyLangs model, a word embedding beside the highway's output).

:class:`TokenVectorCache`: the token layer gives a word the same vector wherever
it occurs, so in prediction a word seen before needs no CNN: its vector is
looked up by its character ids. The cache is bounded (least
recently used words leave first) and serves one encoder with one set of
weights: another encoder, or changed weights (an in-place torch update,
``load_state_dict``, or :meth:`CharacterEncoder.weights_changed` after an
update torch cannot see), empties it before use.
"""
import weakref
from collections import OrderedDict
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from .char_ids import PAD_CHAR
from .options import BiLMOptions
from .prepacked_linear import PrepackedWeights

# Above this many distinct tokens MKL multiplies the highway matrices faster.
_PREPACKED_MAX_ROWS = 256
# Tokens are convolved in groups by length (characters with <bow> and <eow>):
# a group reads only the windows that touch its longest token's characters.
_GROUP_MAX_CHARS = (8, 12, 16, 24)


class CharacterEncoder(nn.Module):
    """Turns the character ids of each token into one token vector.

    Parameters keep the original layout where it costs nothing (matrices as
    ``(in, out)``), so that converting to and from `weights.hdf5` is exact.
    `pad_id`: the id of the padding character; `word_columns`: 1 when each
    token's ids start with a word id (the model has a word embedding).
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

    def forward(self, char_ids: Tensor) -> Tensor:
        """:param char_ids: *Shape:* ``(n_tokens, word_columns + max_chars)``, int64.
        :returns: token vectors, *Shape:* ``(n_tokens, projection_dim)``.
        """
        features = self._filter_features(char_ids[:, self.word_columns :])
        width = features.shape[1]
        for k, (weight, bias) in enumerate(zip(self.highway_weights, self.highway_biases)):
            projected = self._prepacked.matmul(features, weight, (k,), bias=bias, max_rows=_PREPACKED_MAX_ROWS)
            if projected is None:
                projected = torch.addmm(bias, features, weight)
            transform = torch.relu(projected[:, :width])
            gate = torch.sigmoid(projected[:, width:])
            features = gate * transform + (1.0 - gate) * features
        if self.word_embedding is not None:
            features = torch.cat([nn.functional.embedding(char_ids[:, 0], self.word_embedding), features], dim=1)
        if self.projection is not None:
            features = self.projection(features)
        return features

    def _filter_features(self, char_ids: Tensor) -> Tensor:
        """Every filter bank's max-pooled response, with no work on padding.

        A window that lies wholly in padding gives the same response for every
        token; it is computed once (``_padding_responses``). Tokens are sorted by
        length and convolved in groups, each over the windows that touch its
        longest token's characters; the max over those and the padding response
        is the max over all positions.

        :returns: *Shape:* ``(n_tokens, n_filters)``, in the order of ``char_ids``.
        """
        n_chars = (char_ids != self.pad_id).sum(dim=1)
        sorted_n_chars, order = torch.sort(n_chars, stable=True)
        bounds = torch.searchsorted(
            sorted_n_chars, torch.tensor(_GROUP_MAX_CHARS, device=n_chars.device), right=True
        ).tolist()
        padding = self._padding_responses()
        sorted_ids = char_ids.index_select(0, order)
        groups, start = [], 0
        for end in [*bounds, len(order)]:
            if end > start:
                longest = int(sorted_n_chars[end - 1])
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
        if len(order) > 1:
            features = features.index_select(0, torch.argsort(order))
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
        """One filter bank: VALID convolution, max over positions, activation.

        Only windows starting inside the longest token are multiplied; when
        windows wholly in padding were skipped, their response joins the max.
        The convolution runs as one matrix multiply over the character windows,
        1.5x faster on CPU than ``conv1d`` for these shapes. The bias is added
        after the max: rounding is monotone, so the result is the same, and the
        large response matrix is not written twice.

        :param chars: *Shape:* ``(n_tokens, max_chars, char_embedding_dim)``, tokens
            of at most ``longest`` characters.
        :returns: *Shape:* ``(n_tokens, n_filters_of_this_width)``.
        """
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
            torch.is_autocast_enabled(next(encoder.parameters()).device.type),
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
