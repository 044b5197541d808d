"""Tokenized corpus files kept beside a run, so its text is tokenized once.

The vocabulary pass writes each file's records as JSON lines, which training streams every epoch and after a resume.
A cache is tied to its source's size and mtime and to the tokenizer settings: if either changes, it is not used.
"""
import contextlib
import hashlib
import json
from itertools import chain
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple

from ..errors import InputError
from ..output_files import atomic_output_path

Sentence = List[str]
#: One record: its sentences, and the (offset, line) a reader resumes from after it.
CachedRecord = Tuple[List[Sentence], int, int]


def file_identity(path: Path) -> List:
    """A file as a cache or a checkpoint knows it: ``[resolved path, size, modification time (ns)]``."""
    stat = path.stat()
    return [str(path.resolve()), stat.st_size, stat.st_mtime_ns]


class TokenizedFiles:
    """Tokenized records of corpus files, in `directory`.

    :param settings: everything besides the file that decides a record's
        sentences (tokenizer, sentence splitting, window, format, text field).
    """

    def __init__(self, directory: Path, settings: str) -> None:
        self.directory = Path(directory)
        self.settings = settings

    def path(self, source: Path) -> Path:
        key = json.dumps([*file_identity(source), self.settings])
        return self.directory / f"{source.name}.{hashlib.sha1(key.encode('utf8')).hexdigest()[:16]}.jsonl"

    def records(self, source: Path, start: int) -> Optional[Iterator[CachedRecord]]:
        """The cached records of `source` from byte offset (or document) `start`
        on, or None when `source` has no complete cache."""
        path = self.path(source)
        if not path.is_file():
            return None
        return _read(path, start)

    @contextlib.contextmanager
    def writer(self, source: Path) -> Iterator[Callable[[int, CachedRecord], None]]:
        """Yield ``add(record_start, record)`` for a whole pass over `source`; the
        cache appears only if the pass completes (no exception, no early close)."""
        with atomic_output_path(self.path(source)) as tmp, tmp.open("w", encoding="utf8") as handle:

            def add(start: int, record: CachedRecord) -> None:
                sentences, next_start, next_line = record
                handle.write(json.dumps([start, next_start, next_line, sentences], ensure_ascii=False) + "\n")

            yield add


def _read(path: Path, start: int) -> Iterator[CachedRecord]:
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                if start and int(line[1 : line.index(b",")]) < start:
                    continue  # resuming: records before the saved position
                _, next_start, next_line, sentences = json.loads(line)
                if type(next_start) is not int or type(next_line) is not int or not _sentences(sentences):
                    raise ValueError
            except (ValueError, TypeError, RecursionError):
                raise InputError(
                    f"{path}, line {number}: damaged tokenized text (not a record of sentences and their place); "
                    f"delete {path.parent} to tokenize the corpus again"
                ) from None
            yield sentences, next_start, next_line


def _sentences(value: object) -> bool:
    """Whether `value` is a list of sentences (lists of strings); the loops over words run in C."""
    return (
        type(value) is list
        and all(type(s) is list for s in value)
        and set(map(type, chain.from_iterable(value))) <= {str}  # type: ignore[arg-type]
    )
