"""The biLM training objective: joint forward + backward log-likelihood, one shared softmax."""
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple, Union

import numpy
import torch
from torch import Tensor, nn

from ..models.pytorch.bilm import ElmoBiLM, PackedEncoding
from ..models.pytorch.devices import DeviceLike, to_device
from ..models.pytorch.char_ids import BatchWords, TokenIds
from ..models.pytorch.host_batch import HostBatch
from .softmax import LMSoftmax, SampledCandidates
from .vocab import Vocabulary


def target_ids(sentences: Sequence[Sequence[str]], vocab: Vocabulary) -> Tensor:
    """Word ids of ``<S> w_1 .. w_n </S>`` per sentence, zero padded.

    *Shape:* ``(batch, max_tokens + 2)``, int64; column ``p`` is position ``p``
    of :class:`PackedEncoding`.
    """
    return torch.from_numpy(_target_ids(BatchWords.of(sentences), vocab))


def _target_ids(words: BatchWords, vocab: Vocabulary) -> numpy.ndarray:
    """:func:`target_ids` of the sentences whose words are `words` (each distinct word looked up once)."""
    lengths = words.lengths
    max_len = int(lengths.max(initial=0))
    ids = numpy.zeros((len(lengths), max_len + 2), dtype=numpy.int64)
    ids[:, 0] = vocab.bos_id
    in_sentence = numpy.arange(max_len)[None, :] < lengths[:, None]
    word_ids = numpy.array(vocab.ids(words.words), dtype=numpy.int64)
    ids[:, 1 : max_len + 1][in_sentence] = word_ids[words.places]
    ids[numpy.arange(len(lengths)), lengths + 1] = vocab.eos_id
    return ids


@dataclass(frozen=True)
class LMBatch:
    """A training batch as the host prepares it: the biLM's batch and the word each
    direction predicts at each packed row, *Shape:* ``(2, n_rows)``, int32 (the next
    word forward, the previous one backward)."""

    bilm: HostBatch
    targets: Tensor

    @classmethod
    def of(cls, batch: HostBatch, targets: Tensor) -> "LMBatch":
        """:param targets: the sentences' :func:`target_ids`, on the host."""
        return cls._of_ids(batch, targets.cpu().numpy())

    @classmethod
    def of_sentences(cls, sentences: Sequence[Sequence[str]], token_ids: TokenIds, vocab: Vocabulary) -> "LMBatch":
        """The batch of tokenised `sentences` for a biLM reading `token_ids`: each distinct
        word's ids and vocabulary id are found once (the same batch as :meth:`of`)."""
        words = BatchWords.of(sentences)
        return cls._of_ids(HostBatch.of_words(words, token_ids), _target_ids(words, vocab))

    @classmethod
    def _of_ids(cls, batch: HostBatch, words: numpy.ndarray) -> "LMBatch":
        rows, positions = batch.rows.numpy(), batch.positions.numpy()
        predicted = numpy.stack([words[rows, positions[0] + 1], words[rows, positions[1] - 1]])
        return cls(batch, torch.from_numpy(predicted.astype(numpy.int32)))

    def to(self, device: DeviceLike) -> "LMBatch":
        return LMBatch(self.bilm.to(device), to_device(self.targets, device))


def n_predictions(sentences: Sequence[Sequence[str]]) -> int:
    """Predictions per direction: every word plus the sentence end (the "tokens" of perplexity)."""
    return sum(map(len, sentences)) + len(sentences)


class BiLMLanguageModel(nn.Module):
    """An :class:`ElmoBiLM` (character CNN and LSTMs) with one softmax for both directions.

    The forward LSTM at position ``p`` of ``<S> w_1 .. w_n </S>`` predicts the word at ``p + 1``, the backward the
    word at ``p - 1``, both from the shared CNN's token vectors. `output_dropout`: on the top LSTM layer before the
    softmax."""

    def __init__(self, bilm: ElmoBiLM, softmax: LMSoftmax, *, output_dropout: float = 0.0) -> None:
        super().__init__()
        if softmax.weight.shape[1] != bilm.options.projection_dim:
            raise ValueError(
                f"softmax dim {softmax.weight.shape[1]} != biLM projection_dim {bilm.options.projection_dim}"
            )
        self.bilm = bilm
        self.softmax = softmax
        self.output_dropout = output_dropout

    def prepare(self, char_ids: Tensor, targets: Tensor) -> LMBatch:
        """The host's part of a batch: :meth:`ElmoBiLM.host_batch` and each packed row's targets.

        :param char_ids: *Shape:* ``(batch, max_tokens, 50)`` (see ``batch_to_char_ids``).
        :param targets: *Shape:* ``(batch, max_tokens + 2)`` (see :func:`target_ids`).
        """
        return LMBatch.of(self.bilm.host_batch(char_ids), targets)

    def forward(
        self, char_ids: Union[Tensor, LMBatch], targets: Optional[Tensor] = None,
        candidates: Optional[SampledCandidates] = None,
    ) -> Tensor:
        """Summed negative log-likelihood per direction, *Shape:* ``(2,)``, float32.

        :param char_ids: the host's ids and `targets` (see :meth:`prepare`), or their :class:`LMBatch`.
        :param candidates: sampled-softmax negatives; ``None`` = full softmax.
        """
        nll, _ = self.token_nll(char_ids, targets, candidates)
        return nll.sum(dim=1)

    def token_nll(
        self, char_ids: Union[Tensor, LMBatch], targets: Optional[Tensor] = None,
        candidates: Optional[SampledCandidates] = None,
    ) -> Tuple[Tensor, PackedEncoding]:
        """Per-prediction NLL in packed order, *Shape:* ``(2, n_rows)``, and the encoding
        (its ``rows``/``forward_positions``/``backward_positions`` say which is which)."""
        batch = char_ids if isinstance(char_ids, LMBatch) else self.prepare(char_ids, targets)
        batch = batch.to(self.bilm.device)
        encoding = self.bilm.encode_packed(batch.bilm)
        top = encoding.layers[-1]
        n_rows = top.shape[1]
        if self.output_dropout and self.training:
            top = nn.functional.dropout(top, self.output_dropout, True)
        nll = self.softmax.nll(top.reshape(2 * n_rows, top.shape[2]), batch.targets.flatten().long(), candidates)
        return nll.view(2, n_rows), encoding
