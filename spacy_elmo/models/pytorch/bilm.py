"""The ELMo biLM: character ids in, L + 1 layers of contextual token vectors out.

Also how sentences are batched for it (by length, so batches carry little
padding) and how it gathers rows (with a gradient that is the same on every run).
"""
from dataclasses import dataclass, replace
from typing import Iterator, List, Optional, Sequence, Sized, Union

import torch
from torch import Tensor, nn

from .char_cnn import CharacterEncoder, TokenVectorCache
from .char_ids import BYTE_IDS, BatchWords, TokenIds
from .devices import to_device
from .host_batch import HostBatch
from .lstm import BiLstmStack, DistinctInputs
from .lstm.int8_products import check_precision
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

    Tensor indexing sums a repeated row's gradient in an order that depends on thread timing on CPU, so identical
    training runs drift apart; ``index_select`` sums it in index order, bit for bit the same every run.
    """
    rows = torch.index_select(table, 0, index.reshape(-1))
    return rows.view(*index.shape, *table.shape[1:])


@dataclass
class BiLMOutput:
    """The biLM's representations of a batch.

    ``layers``: *Shape:* ``(batch, n_layers + 1, max_tokens, 2 * projection_dim)``; layer 0 is ``[token; token]``,
    layer j ``[forward_j; backward_j]``, boundary tokens removed, zeros at padded positions. ``mask``: *Shape:*
    ``(batch, max_tokens)``, True at real tokens."""

    layers: Tensor
    mask: Tensor


@dataclass
class PackedEncoding:
    """The biLM's LSTM outputs in packed order, for language-model training.

    Packed row ``k`` belongs to sentence ``rows[k]``, its forward direction at position ``forward_positions[k]`` and
    its backward at ``backward_positions[k]`` of ``<S> tokens... </S>`` (0 = ``<S>``). ``layers[l]``: *Shape:*
    ``(2, n_rows, projection_dim)``."""

    layers: List[Tensor]
    rows: Tensor
    forward_positions: Tensor
    backward_positions: Tensor
    token_vectors: Tensor
    token_index: Tensor


class ElmoBiLM(nn.Module):
    """Character CNN + bidirectional LSTM language model (Peters et al. 2018).

    Sentences are encoded independently from a zero LSTM state, so a sentence gets the same vectors whatever else is
    in the batch. `token_ids` turns words into the character CNN's ids: UTF-8 bytes (bilm-tf), or an
    ELMoForManyLangs model's vocabularies."""

    def __init__(self, options: BiLMOptions, token_ids: TokenIds = BYTE_IDS) -> None:
        super().__init__()
        self.options = options
        self.token_ids = token_ids
        self.char_encoder = CharacterEncoder(options, pad_id=token_ids.pad_id, word_columns=token_ids.word_columns)
        self.lstm = BiLstmStack(options)

    def ids_of(self, sentences: Sequence[Sequence[str]]) -> Tensor:
        """The input of :meth:`forward` for tokenised sentences (on the CPU)."""
        return self.token_ids.batch(sentences)

    def host_batch(self, char_ids: Tensor) -> HostBatch:
        """What the host finds in a batch of ids (:meth:`ids_of`) before the copy to the device."""
        return HostBatch.of(char_ids, self.token_ids)

    def prepare(self, sentences: Sequence[Sequence[str]]) -> HostBatch:
        """``host_batch(ids_of(sentences))``, made from each distinct word once: faster."""
        return HostBatch.of_words(BatchWords.of(sentences), self.token_ids)

    @property
    def device(self) -> torch.device:
        return self.lstm.biases[0].device

    @property
    def n_output_layers(self) -> int:
        return self.options.n_output_layers

    @property
    def output_dim(self) -> int:
        return self.options.output_dim

    @property
    def precision(self) -> str:
        """"fp32", or "int8" (opt-in): in prediction on an x86 CPU, the LSTM's large
        products in int8 (:mod:`.lstm.int8_products`); checked when set."""
        return self.lstm.precision

    @precision.setter
    def precision(self, value: str) -> None:
        check_precision(value)
        self.lstm.precision = value

    def weights_changed(self) -> None:
        """Drop what was derived from the weights; call after updating them
        outside torch (Thinc's optimizer writes into the parameters' memory)."""
        self.char_encoder.weights_changed()
        self.lstm.weights_changed()

    def forward(
        self, char_ids: Union[Tensor, HostBatch], *, token_cache: Optional[TokenVectorCache] = None,
    ) -> BiLMOutput:
        """Encode a batch of sentences (boundary tokens are added here) on the model's device.

        `char_ids`: *Shape:* ``(batch, max_tokens, token_width)`` (:meth:`ids_of`), left-aligned, zero rows at padding,
        on the host (ids on a device are read back: a synchronisation), or their :meth:`host_batch`. `token_cache`: in
        prediction, reuse the token vectors of words seen before instead of running the character CNN."""
        batch = char_ids if isinstance(char_ids, HostBatch) else self.host_batch(char_ids)
        n_sentences, max_tokens = batch.mask.shape
        if n_sentences == 0 or max_tokens == 0:
            empty = self.lstm.biases[0].new_zeros((n_sentences, self.n_output_layers, max_tokens, self.output_dim))
            return BiLMOutput(empty, to_device(batch.mask, self.device))
        if token_cache is not None and batch.lookup is None:
            batch = replace(batch, lookup=token_cache.lookup(self.char_encoder, batch.tokens.ids.numpy()))
        batch = batch.to(self.device)
        encoding = self.encode_packed(batch, token_cache=token_cache)
        return BiLMOutput(self.unpack(encoding, batch), batch.mask)

    def encode_packed(
        self, batch: HostBatch, *, token_cache: Optional[TokenVectorCache] = None,
    ) -> PackedEncoding:
        """Run the character encoder and the LSTMs over `batch` (on the model's device); outputs stay packed.

        The forward direction covers positions ``0 .. n``, the backward ``n + 1 .. 1`` of each ``<S> w_1 .. w_n </S>``:
        exactly what the output layers and the LM objective (predict the next / previous word) need.
        """
        if token_cache is not None and batch.lookup is not None:
            token_vectors = token_cache.vectors(self.char_encoder, batch.lookup)
        else:
            token_vectors = self.char_encoder(batch.tokens)
        index = batch.input_index
        # One gather per direction: in training a repeated token's gradient sums in the same order as ever.
        inputs = torch.stack([select_rows(token_vectors, index[0]), select_rows(token_vectors, index[1])])
        layers, _ = self.lstm(inputs, batch.plan, None, DistinctInputs(token_vectors, index))
        return PackedEncoding(
            layers=layers, rows=batch.rows, forward_positions=batch.positions[0],
            backward_positions=batch.positions[1], token_vectors=token_vectors, token_index=batch.token_index,
        )

    def unpack(self, encoding: PackedEncoding, batch: HostBatch) -> Tensor:
        """Gather the packed outputs into ``(batch, L + 1, max_tokens, 2 * proj)``."""
        places = batch.output_index  # n_rows (past the packed rows) points at a zero row
        zero = encoding.layers[0].new_zeros((2, 1, encoding.layers[0].shape[2]))
        tokens = select_rows(encoding.token_vectors, encoding.token_index[:, 1:-1])
        tokens = tokens * batch.mask.unsqueeze(2).to(tokens.dtype)
        layers = [torch.cat([tokens, tokens], dim=2)]
        for packed in encoding.layers:
            padded = torch.cat([packed, zero], dim=1)
            layers.append(torch.cat([select_rows(padded[0], places[0]), select_rows(padded[1], places[1])], dim=2))
        return torch.stack(layers, dim=1)
