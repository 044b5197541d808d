"""The ELMo biLM: character ids in, L + 1 layers of contextual token vectors out.

Also how sentences are batched for it (by length, so batches carry little
padding) and how it gathers rows (with a gradient that is the same on every run).
"""
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence, Sized, Union

import torch
from torch import Tensor, nn

from .char_cnn import CharacterEncoder, TokenVectorCache
from .char_ids import BYTE_IDS, ByteIds, distinct_rows
from .dictionary_ids import DictionaryIds
from .lstm import BiLstmStack, DistinctInputs, PackingPlan
from .options import BiLMOptions


def length_sorted_batches(
    sentences: Sequence[Sized], *, batch_size: int, max_batch_tokens: int
) -> Iterator[List[int]]:
    """Indices of ``sentences`` in batches of similar length, longest first.

    A batch holds at most ``batch_size`` sentences and at most
    ``max_batch_tokens`` padded tokens (``n_sentences * longest``); a sentence
    longer than ``max_batch_tokens`` gets a batch of its own.
    """
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]), reverse=True)
    batch: List[int] = []
    for i in order:
        longest = len(sentences[batch[0]]) if batch else len(sentences[i])
        if batch and (len(batch) == batch_size or (len(batch) + 1) * longest > max_batch_tokens):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def select_rows(table: Tensor, index: Tensor) -> Tensor:
    """``table[index]``, *Shape:* ``(*index.shape, *table.shape[1:])``.

    Indexing a tensor with an index tensor sums the gradient of a repeated row
    (a word that occurs twice in a batch) in an order that depends on thread
    timing on CPU, so two identical training runs drift apart; ``index_select``
    sums it in index order, bit for bit the same every run.
    """
    rows = torch.index_select(table, 0, index.reshape(-1))
    return rows.view(*index.shape, *table.shape[1:])


@dataclass
class BiLMOutput:
    """The biLM's representations of a batch.

    ``layers``: *Shape:* ``(batch, n_layers + 1, max_tokens, 2 * projection_dim)``;
    layer 0 is ``[token; token]``, layer j is ``[forward_j; backward_j]``, boundary
    tokens removed, zeros at padded positions. ``mask``: *Shape:*
    ``(batch, max_tokens)``, True at real tokens.
    """

    layers: Tensor
    mask: Tensor


@dataclass
class PackedEncoding:
    """The biLM's LSTM outputs in packed order, for language-model training.

    Packed row ``k`` belongs to sentence ``rows[k]``; the forward direction there
    sits at position ``forward_positions[k]`` and the backward direction at
    ``backward_positions[k]`` of ``<S> tokens... </S>`` (0 = ``<S>``).
    ``layers[l]``: *Shape:* ``(2, n_rows, projection_dim)``.
    """

    layers: List[Tensor]
    rows: Tensor
    forward_positions: Tensor
    backward_positions: Tensor
    token_vectors: Tensor
    token_index: Tensor


class ElmoBiLM(nn.Module):
    """Character CNN + bidirectional LSTM language model (Peters et al. 2018).

    Sentences are encoded independently from a zero LSTM state, so a sentence
    gets the same vectors whatever else is in the batch. `token_ids` turns words
    into the ids the character CNN reads: UTF-8 bytes (bilm-tf), or an
    ELMoForManyLangs model's vocabularies.
    """

    def __init__(self, options: BiLMOptions, token_ids: Union[ByteIds, DictionaryIds] = BYTE_IDS) -> None:
        super().__init__()
        self.options = options
        self.token_ids = token_ids
        self.char_encoder = CharacterEncoder(options, pad_id=token_ids.pad_id, word_columns=token_ids.word_columns)
        self.lstm = BiLstmStack(options)
        self.register_buffer("boundary_ids", torch.tensor(token_ids.boundary_rows), persistent=False)

    def ids_of(self, sentences: Sequence[Sequence[str]]) -> Tensor:
        """The input of :meth:`forward` for tokenised sentences (on the CPU)."""
        return self.token_ids.batch(sentences)

    @property
    def n_output_layers(self) -> int:
        return self.options.n_output_layers

    def set_dropout(self, rate: float) -> None:
        """Dropout on the input of every LSTM layer in training mode (0 turns it off)."""
        self.lstm.set_dropout(rate)

    @property
    def output_dim(self) -> int:
        return self.options.output_dim

    def weights_changed(self) -> None:
        """Drop what was derived from the weights; call after updating them
        outside torch (Thinc's optimizer writes into the parameters' memory)."""
        self.char_encoder.weights_changed()
        self.lstm.weights_changed()

    def forward(
        self, char_ids: Tensor, *, token_cache: Optional[TokenVectorCache] = None, precision: str = "fp32",
    ) -> BiLMOutput:
        """Encode a batch of sentences (boundary tokens are added here).

        :param char_ids: *Shape:* ``(batch, max_tokens, token_width)`` (50 character
            ids; see :meth:`ids_of`), int64, tokens left-aligned, all-zero rows for
            padded tokens.
        :param token_cache: in prediction, look up the token vectors of words
            seen before instead of running the character CNN.
        :param precision: "fp32", or "int8" (opt-in): in prediction on an x86
            CPU, the LSTM's large products in int8 (:mod:`.lstm.int8_products`).
        """
        batch, max_tokens = char_ids.shape[:2]
        mask = (char_ids > 0).any(dim=2)
        lengths = mask.sum(dim=1)
        if batch == 0 or max_tokens == 0:
            empty = self.lstm.biases[0].new_zeros((batch, self.n_output_layers, max_tokens, self.output_dim))
            return BiLMOutput(empty, mask)
        encoding = self.encode_packed(char_ids, mask, lengths, token_cache=token_cache, precision=precision)
        return BiLMOutput(self.unpack(encoding, lengths, max_tokens), mask)

    def encode_packed(
        self,
        char_ids: Tensor,
        mask: Tensor,
        lengths: Tensor,
        *,
        token_cache: Optional[TokenVectorCache] = None,
        precision: str = "fp32",
    ) -> PackedEncoding:
        """Run the character encoder and the LSTMs; outputs stay packed.

        The forward direction covers positions ``0 .. n`` and the backward
        direction ``n + 1 .. 1`` of each ``<S> w_1 .. w_n </S>``: exactly what the
        output layers and the LM objective (predict the next / previous word) need.
        """
        device = char_ids.device
        token_vectors, token_index = self._token_vectors(char_ids, mask, token_cache)
        n_steps = lengths + 1
        sorted_order = torch.argsort(n_steps, descending=True, stable=True)
        sorted_steps = n_steps[sorted_order]
        plan = PackingPlan.from_sorted_lengths(sorted_steps.tolist())
        time = torch.arange(len(plan.batch_sizes), device=device)
        step_t, sorted_row = (time[:, None] < sorted_steps[None, :]).nonzero(as_tuple=True)
        rows = sorted_order[sorted_row]
        forward_positions = step_t
        backward_positions = lengths[rows] + 1 - step_t
        input_index = torch.stack([token_index[rows, forward_positions], token_index[rows, backward_positions]])
        # One gather per direction: in training a repeated token's gradient sums in the same order as ever.
        inputs = torch.stack([select_rows(token_vectors, input_index[0]), select_rows(token_vectors, input_index[1])])
        layers, _ = self.lstm(inputs, plan, None, DistinctInputs(token_vectors, input_index), precision=precision)
        return PackedEncoding(
            layers=layers, rows=rows, forward_positions=forward_positions,
            backward_positions=backward_positions, token_vectors=token_vectors, token_index=token_index,
        )

    def _token_vectors(self, char_ids: Tensor, mask: Tensor, token_cache: Optional[TokenVectorCache]):
        """Token vectors of each distinct token string, and where each position's is.

        :returns: vectors *Shape:* ``(n_distinct, projection_dim)`` and an index
            *Shape:* ``(batch, max_tokens + 2)`` over ``<S> tokens... </S>``.
        """
        batch, max_tokens = mask.shape
        ids = torch.cat([self.boundary_ids, char_ids[mask]])
        distinct, inverse = distinct_rows(ids)
        if token_cache is None:
            token_vectors = self.char_encoder(distinct)
        else:
            token_vectors = token_cache.token_vectors(self.char_encoder, distinct)
        token_index = inverse.new_full((batch, max_tokens + 2), int(inverse[1]))
        token_index[:, 0] = inverse[0]
        token_index[:, 1:-1][mask] = inverse[2:]
        return token_vectors, token_index

    def unpack(self, encoding: PackedEncoding, lengths: Tensor, max_tokens: int) -> Tensor:
        """Gather the packed outputs into ``(batch, L + 1, max_tokens, 2 * proj)``."""
        batch = lengths.shape[0]
        n_rows = encoding.rows.shape[0]
        device = lengths.device
        token_mask = torch.arange(max_tokens, device=device)[None, :] < lengths[:, None]
        halves = []
        for positions in (encoding.forward_positions, encoding.backward_positions):
            # Packed row of each (sentence, position); n_rows points at a zero row.
            where = torch.full((batch, max_tokens + 2), n_rows, device=device, dtype=torch.long)
            where[encoding.rows, positions] = torch.arange(n_rows, device=device)
            # Boundary outputs (</S> backward, for one) must not land on padding.
            halves.append(where[:, 1 : max_tokens + 1].masked_fill(~token_mask, n_rows))
        zero = encoding.layers[0].new_zeros((2, 1, encoding.layers[0].shape[2]))
        tokens = select_rows(encoding.token_vectors, encoding.token_index[:, 1 : max_tokens + 1])
        tokens = tokens * token_mask.unsqueeze(2).to(tokens.dtype)
        layers = [torch.cat([tokens, tokens], dim=2)]
        for packed in encoding.layers:
            padded = torch.cat([packed, zero], dim=1)
            layers.append(torch.cat([select_rows(padded[0], halves[0]), select_rows(padded[1], halves[1])], dim=2))
        return torch.stack(layers, dim=1)
