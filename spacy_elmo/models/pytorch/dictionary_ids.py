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
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

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

    def batch(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """*Shape:* ``(n_sentences, max_tokens, word_columns + max_chars)``, int64,
        without boundary tokens; padded tokens are all 0."""
        return padded_ids(sentences, self.row, self.word_columns + self.max_chars)

    def to_dict(self) -> Dict[str, Any]:
        """Entries in id order, for serialization (None for an id no entry has)."""
        return {
            "characters": _in_id_order(self.characters),
            "words": None if self.words is None else _in_id_order(self.words),
            "max_chars": self.max_chars,
        }

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "DictionaryIds":
        words = data["words"]
        return cls(
            characters={c: i for i, c in enumerate(data["characters"]) if c is not None},
            words=None if words is None else {w: i for i, w in enumerate(words) if w is not None},
            max_chars=int(data["max_chars"]),
        )


def _in_id_order(entries: Dict[str, int]) -> List[Optional[str]]:
    keys: List[Optional[str]] = [None] * (max(entries.values(), default=-1) + 1)
    for key, i in entries.items():
        keys[i] = key
    return keys
