"""The softmax vocabulary: frequency-sorted words, bilm-tf's `vocab.txt` layout.

`vocab.txt` holds one word a line, lines ended by ``\n`` alone: a word may hold any
other character, ``\r`` and the separators `str.splitlines` splits at (``\x85``,
``\u2028``, ...) included, and reads back the same.
"""
import hashlib
from collections import Counter
from itertools import repeat
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Union

from ..errors import InputError
from ..input_files import MAX_VOCABULARY_BYTES, read_regular_file
from ..models.pytorch.char_ids import BOS_TOKEN, EOS_TOKEN
from ..output_files import atomic_output_path

UNK_TOKEN = "<UNK>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)


class Vocabulary:
    """Words with ids; `<S>`, `</S>`, `<UNK>` are ids 0, 1, 2, then the most frequent first.

    The log-uniform sampler of the sampled softmax assumes this frequency order.
    """

    bos_id, eos_id, unk_id = 0, 1, 2

    def __init__(self, words: Sequence[str], *, source: str = "vocabulary") -> None:
        # The messages name lines, never words: vocab.txt may be a link to any file.
        if tuple(words[:3]) != SPECIAL_TOKENS:
            raise InputError(f"{source}: the first three lines must be the words {', '.join(SPECIAL_TOKENS)}")
        index: Dict[str, int] = {}
        for i, word in enumerate(words):
            if not storable(word):
                raise InputError(f"{source}: line {i + 1}: an empty word, or whitespace at either end of it")
            if word in index:
                raise InputError(f"{source}: line {i + 1}: the word of line {index[word] + 1} again")
            index[word] = i
        self.words: List[str] = list(words)
        self._index = index

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self._index

    def ids(self, tokens: Iterable[str]) -> List[int]:
        """Word ids; unknown words map to `<UNK>`."""
        return list(map(self._index.get, tokens, repeat(self.unk_id)))

    def fingerprint(self) -> str:
        """A short hash that tells two vocabularies apart (stored in checkpoints)."""
        return hashlib.sha1("\n".join(self.words).encode("utf8")).hexdigest()[:16]

    @classmethod
    def from_counts(cls, counts: Counter, *, max_size: int, min_count: int = 1) -> "Vocabulary":
        """The `max_size` most frequent words seen at least `min_count` times.

        Ties are broken alphabetically so the result does not depend on reading order.
        Words that cannot be a line of `vocab.txt` (:func:`storable`) are left out: they
        are predicted as `<UNK>`, and their characters still reach the biLM.
        """
        ranked = sorted(
            (
                item for item in counts.items()
                if item[1] >= min_count and item[0] not in SPECIAL_TOKENS and storable(item[0])
            ),
            key=lambda item: (-item[1], item[0]),
        )
        return cls(list(SPECIAL_TOKENS) + [word for word, _ in ranked[:max_size]])

    def to_disk(self, path: Union[str, Path]) -> None:
        with atomic_output_path(path) as tmp:
            tmp.write_bytes(("\n".join(self.words) + "\n").encode("utf8"))

    @classmethod
    def from_disk(cls, path: Union[str, Path]) -> "Vocabulary":
        path = Path(path)
        data = read_regular_file(path, max_bytes=MAX_VOCABULARY_BYTES, error=InputError, what="Vocabulary")
        try:
            text = data.decode("utf8")  # bytes: text mode would also split lines at "\r"
        except UnicodeDecodeError as err:
            raise InputError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
        words = text.split("\n")
        if words and words[-1] == "":
            words.pop()
        # A word never ends in whitespace, so a line's last "\r" is a Windows line end.
        return cls([word[:-1] if word.endswith("\r") else word for word in words], source=str(path))


def storable(word: str) -> bool:
    """Whether `word` can be one line of `vocab.txt`: not empty, no "\n", no whitespace at either end."""
    return bool(word) and word == word.strip() and "\n" not in word
