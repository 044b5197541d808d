"""UTF-8 byte character ids, the biLM's input (bilm-tf/AllenNLP layout).

A token becomes ``[BOW, byte_1 .. byte_48, EOW, PAD, ...]`` (50 ids), then every id
is shifted by +1 so that id 0 marks a padded (absent) token.
"""
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, count
from operator import itemgetter
from typing import Callable, List, Protocol, Sequence, Tuple

import numpy
import torch

MAX_CHARS_PER_TOKEN = 50
MAX_BYTES_PER_TOKEN = MAX_CHARS_PER_TOKEN - 2
BOS_CHAR, EOS_CHAR = 256, 257
BOW_CHAR, EOW_CHAR, PAD_CHAR = 258, 259, 260
BOS_TOKEN, EOS_TOKEN = "<S>", "</S>"
INT16_MAX = 32767
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class BatchWords:
    """The tokens of a batch of sentences as distinct words: ``words``, each distinct word once
    (in order of first occurrence); ``places`` *Shape:* ``(n_tokens,)``: each token's word,
    sentence after sentence; ``lengths`` *Shape:* ``(batch,)``: the sentences' tokens."""

    words: List[str]
    places: numpy.ndarray
    lengths: numpy.ndarray

    @classmethod
    def of(cls, sentences: Sequence[Sequence[str]]) -> "BatchWords":
        tokens = list(chain.from_iterable(sentences))
        words = list(dict.fromkeys(tokens))  # loops in C, as the next two do
        index = dict(zip(words, count()))
        # itemgetter of one key returns its value, not a tuple of one
        places = numpy.array(itemgetter(*tokens)(index) if len(tokens) > 1 else [index[t] for t in tokens], numpy.int64)
        return cls(words, places, numpy.fromiter(map(len, sentences), dtype=numpy.int64, count=len(sentences)))


def _row(payload: Sequence[int]) -> Tuple[int, ...]:
    row = [PAD_CHAR + 1] * MAX_CHARS_PER_TOKEN
    row[0] = BOW_CHAR + 1
    for i, char in enumerate(payload, start=1):
        row[i] = char + 1
    row[len(payload) + 1] = EOW_CHAR + 1
    return tuple(row)


BOS_IDS = _row([BOS_CHAR])
EOS_IDS = _row([EOS_CHAR])


@lru_cache(maxsize=200_000)
def token_char_ids(token: str) -> Tuple[int, ...]:
    """The 50 character ids (offset by +1) of one token.

    The literal strings ``<S>`` and ``</S>`` map to the sentence-boundary ids, as in
    AllenNLP; bytes past the 48th are dropped.
    """
    if token == BOS_TOKEN:
        return BOS_IDS
    if token == EOS_TOKEN:
        return EOS_IDS
    return _row(token.encode("utf-8", "ignore")[:MAX_BYTES_PER_TOKEN])


def batch_to_char_ids(sentences: Sequence[Sequence[str]]) -> torch.Tensor:
    """Character ids of a batch of tokenised sentences, without boundary tokens.

    *Shape:* ``(n_sentences, max_tokens, 50)``, int64; padded tokens are all 0.
    """
    return padded_ids(sentences, byte_rows, MAX_CHARS_PER_TOKEN)


def padded_ids(
    sentences: Sequence[Sequence[str]], rows_of: Callable[[Sequence[str]], numpy.ndarray], width: int
) -> torch.Tensor:
    """Each token's row, made once per distinct word (``rows_of(words)``) and copied to all its places.

    *Shape:* ``(n_sentences, max_tokens, width)``, int64; padded tokens are all 0.
    """
    words = BatchWords.of(sentences)
    lengths = words.lengths
    ids = numpy.zeros((len(lengths), int(lengths.max(initial=0)), width), dtype=numpy.int64)
    if len(words.places):
        ids[numpy.arange(ids.shape[1])[None, :] < lengths[:, None]] = rows_of(words.words)[words.places]
    return torch.from_numpy(ids)


def distinct_rows(char_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``torch.unique(char_ids, dim=0, return_inverse=True)``: ascending rows, each row's place among them.

    On the host, rows are compared as byte strings of big-endian 16-bit ids (32-bit where needed), which sort as their
    values do; NumPy sorts those many times faster than torch finds unique rows. Rows on a device, or with negative ids,
    go through ``torch.unique``. *Shape:* ``(n_rows, width)`` -> ``(n_distinct, width)``, ``(n_rows,)`` int64."""
    if char_ids.device.type == "cpu" and char_ids.shape[0] > 0:
        ids = char_ids.numpy()
        high = ids.max()
        if ids.min() >= 0 and high <= INT32_MAX:
            big_endian = numpy.ascontiguousarray(ids.astype(">i2" if high <= INT16_MAX else ">i4"))
            keys = big_endian.view(numpy.dtype(("S", big_endian.shape[1] * big_endian.itemsize))).ravel()
            order = numpy.argsort(keys, kind="stable")
            ordered = keys[order]
            first_of_its_kind = numpy.concatenate([[True], ordered[1:] != ordered[:-1]])
            inverse = numpy.empty(len(keys), dtype=numpy.int64)
            inverse[order] = numpy.cumsum(first_of_its_kind) - 1
            return torch.from_numpy(ids[order[first_of_its_kind]]), torch.from_numpy(inverse)
    return torch.unique(char_ids, dim=0, return_inverse=True)


def byte_rows(words: Sequence[str]) -> numpy.ndarray:
    """The character ids of each word, *Shape:* ``(n_words, 50)``, int16: every
    :func:`token_char_ids` at once (the bytes of all words are placed by NumPy)."""
    encoded = [word.encode("utf-8", "ignore")[:MAX_BYTES_PER_TOKEN] for word in words]
    n_bytes = numpy.fromiter(map(len, encoded), dtype=numpy.int64, count=len(encoded))
    rows = numpy.full((len(encoded), MAX_CHARS_PER_TOKEN), PAD_CHAR + 1, dtype=numpy.int16)
    rows[:, 0] = BOW_CHAR + 1
    word = numpy.repeat(numpy.arange(len(encoded)), n_bytes)
    column = numpy.arange(len(word)) - numpy.repeat(numpy.cumsum(n_bytes) - n_bytes, n_bytes) + 1
    rows[word, column] = numpy.frombuffer(b"".join(encoded), dtype=numpy.uint8) + 1
    rows[numpy.arange(len(encoded)), n_bytes + 1] = EOW_CHAR + 1
    for i, token in enumerate(words):
        if token in (BOS_TOKEN, EOS_TOKEN):
            rows[i] = token_char_ids(token)
    return rows


class TokenIds(Protocol):
    """How a biLM's input spells a token: a row of ids, ``word_columns`` word ids then
    character ids (+1, so that 0 marks a padded token); each model format gives its own."""

    word_columns: int
    pad_id: int
    boundary_rows: Tuple[Tuple[int, ...], Tuple[int, ...]]

    def rows(self, words: Sequence[str]) -> numpy.ndarray:
        """Each word's row, *Shape:* ``(n_words, width)``."""

    def batch(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """*Shape:* ``(n_sentences, max_tokens, width)``, without boundary tokens; padded tokens are all 0."""


class ByteIds:
    """The bilm-tf/AllenNLP token ids: each token's UTF-8 bytes (see the module)."""

    word_columns = 0
    pad_id = PAD_CHAR + 1
    boundary_rows = (BOS_IDS, EOS_IDS)

    def rows(self, words: Sequence[str]) -> numpy.ndarray:
        """*Shape:* ``(n_words, 50)``; see :func:`byte_rows`."""
        return byte_rows(words)

    def batch(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """*Shape:* ``(n_sentences, max_tokens, 50)``; see :func:`batch_to_char_ids`."""
        return batch_to_char_ids(sentences)


BYTE_IDS = ByteIds()
