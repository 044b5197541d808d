"""Token ids from a character vocabulary (and a word vocabulary), as ELMoForManyLangs
models read their input.

A token (cut to ``max_chars - 2`` characters first) becomes ``[word?, EOW, c_1 .. c_n,
BOW, PAD, ...]``: the word's id when the model has a word embedding, then
``max_chars`` character ids. The markers sit where ELMoForManyLangs puts them (its
``<eow>`` first, its ``<bow>`` last), unknown characters and words get ``<oov>``, and
the sentence boundaries ``<bos>``/``<eos>`` are tokens of one character of that name.
Every id is shifted by +1 so that id 0 marks a padded (absent) token.
"""
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy
import torch

from ...errors import WeightsError
from .char_ids import padded_ids

BOS, EOS, OOV, PAD, BOW, EOW = "<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"
CHARACTER_SPECIALS = (BOS, EOS, OOV, PAD, BOW, EOW)
WORD_SPECIALS = (BOS, EOS, OOV)


@dataclass(frozen=True)
class DictionaryIds:
    """``characters`` and ``words``: each entry's id in the model's embedding (from 0)."""

    characters: Dict[str, int]
    words: Optional[Dict[str, int]]
    max_chars: int

    @property
    def word_columns(self) -> int:
        return 0 if self.words is None else 1

    @property
    def pad_id(self) -> int:
        return self.characters[PAD] + 1

    @property
    def boundary_rows(self) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
        return self.row(BOS), self.row(EOS)

    def row(self, token: str) -> Tuple[int, ...]:
        """The ids of one token, *Shape:* ``(word_columns + max_chars,)``."""
        token = token[: self.max_chars - 2]
        chars = self.characters
        ids = [chars[PAD] + 1] * self.max_chars
        payload = [chars[token]] if token in (BOS, EOS) else [chars.get(c, chars[OOV]) for c in token]
        ids[0] = chars[EOW] + 1
        for i, char in enumerate(payload, start=1):
            ids[i] = char + 1
        ids[len(payload) + 1] = chars[BOW] + 1
        if self.words is None:
            return tuple(ids)
        return (self.words.get(token, self.words[OOV]) + 1, *ids)

    def rows(self, words: Sequence[str]) -> numpy.ndarray:
        """Each word's :meth:`row`, *Shape:* ``(n_words, word_columns + max_chars)``, int64."""
        return numpy.array([self.row(word) for word in words], dtype=numpy.int64).reshape(
            len(words), self.word_columns + self.max_chars
        )

    def batch(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """*Shape:* ``(n_sentences, max_tokens, word_columns + max_chars)``, int64,
        without boundary tokens; padded tokens are all 0."""
        return padded_ids(sentences, self.rows, self.word_columns + self.max_chars)

    def to_dict(self) -> Dict[str, Any]:
        """Entries in id order, for serialization (read back with :func:`from_id_order`)."""
        return {
            "characters": sorted(self.characters, key=self.characters.__getitem__),
            "words": None if self.words is None else sorted(self.words, key=self.words.__getitem__),
            "max_chars": self.max_chars,
        }


def checked_entries(
    entries: Sequence[Tuple[int, str, int]], specials: Tuple[str, ...], source: str, unit: str
) -> Dict[str, int]:
    """A vocabulary from its ``(position, entry, id)`` triples, the position a `unit` of
    `source` ("line"): each id one entry's (two entries of one id would read, but only
    one would be saved), every id below the number of entries, the `specials` among them.
    Messages name positions, never entries: a vocabulary may be any file a link points at."""
    ids: Dict[str, int] = {}
    positions: Dict[int, int] = {}
    for position, entry, i in entries:
        if i in positions:
            raise WeightsError(
                f"{source}, {unit} {position}: id {i} is also the id of {unit} {positions[i]}; "
                "each entry needs an id of its own"
            )
        positions[i] = position
        ids[entry] = i
    missing = [special for special in specials if special not in ids]
    if missing:
        raise WeightsError(f"{source}: lacks the entries {', '.join(missing)}")
    for i, position in positions.items():
        if i >= len(ids):
            raise WeightsError(f"{source}, {unit} {position}: id {i} is not below the number of entries ({len(ids):,})")
    return ids


def from_id_order(keys: Any, specials: Tuple[str, ...], source: str) -> Dict[str, int]:
    """The vocabulary that :meth:`DictionaryIds.to_dict` wrote as `keys`, checked (:func:`checked_entries`)."""
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise WeightsError(f"{source}: not a list of entries")
    return checked_entries([(i + 1, key, i) for i, key in enumerate(keys)], specials, source, "entry")
