""".spacy (DocBin) corpus files: zlib-compressed, and inflated whole by spaCy, so how
far one inflates is measured first, in constant memory, and bounded."""
import zlib
from pathlib import Path
from typing import Any, Iterator, Tuple

from ..errors import InputError

#: A .spacy file may inflate to this many times its size, plus :data:`INFLATION_FLOOR_BYTES`:
#: a corpus of text inflates about 10 times; zlib's most is about 1,000 (a file of zeros).
MAX_INFLATION = 100
INFLATION_FLOOR_BYTES = 64 << 20
_CHUNK_BYTES = 1 << 16


def read_docbin(path: Path, start: int) -> Iterator[Tuple[Any, int, int]]:
    """Yield ``(Doc, next_start, next_line)`` for each document of `path` from index `start` on."""
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    try:
        data = path.read_bytes()
        limit = INFLATION_FLOOR_BYTES + MAX_INFLATION * len(data)
        if inflated_size(data, limit) > limit:
            raise TooLarge(
                f"{path}: inflates to over {limit / 1e6:,.0f} MB, more than {MAX_INFLATION} times its "
                f"{len(data) / 1e6:,.1f} MB (plus {INFLATION_FLOOR_BYTES >> 20} MiB), far more than a corpus of "
                f"text does; refused before reading it (give the text as .txt or .jsonl files)"
            )
        docs = DocBin().from_bytes(data).get_docs(Vocab())
        for index, doc in enumerate(docs):
            if index >= start:
                yield doc, index + 1, index + 1
    except TooLarge:
        raise
    except (ValueError, KeyError, OSError, TypeError, zlib.error) as err:
        raise InputError(f"{path}: not a readable .spacy (DocBin) file ({err})") from None


class TooLarge(InputError):
    """A .spacy file inflates past its bound."""


def inflated_size(data: bytes, limit: int) -> int:
    """The size of zlib-compressed `data` inflated, counted up to just past `limit`
    (never more than about 1 MB of it held at once)."""
    inflater = zlib.decompressobj()
    size = 0
    view = memoryview(data)
    for begin in range(0, len(data), _CHUNK_BYTES):
        pending = view[begin : begin + _CHUNK_BYTES]
        while pending and size <= limit and not inflater.eof:
            size += len(inflater.decompress(pending, 1 << 20))
            pending = inflater.unconsumed_tail
    return size
