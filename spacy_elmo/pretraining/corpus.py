"""Streaming training text: files -> records -> token windows (batches: batch_stream.py).

Every stage keeps an explicit position instead of hidden generator state, so a
:class:`~.batch_stream.BatchStream` can be checkpointed and resumed exactly, and a
corpus far larger than memory is read one record at a time.
"""
import contextlib
import glob
import itertools
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Sequence, Tuple, Union

import numpy

from ..errors import ConfigError, InputError, one_line
from ..models.pytorch.char_ids import MAX_BYTES_PER_TOKEN
from ..output_files import file_kind
from .docbin_files import read_docbin
from .tokenized_files import CachedRecord, Sentence, TokenizedFiles

if TYPE_CHECKING:
    from spacy.language import Language

FORMATS = ("text", "jsonl", "spacy")
WHITESPACE_TOKENIZER = "whitespace"
#: The character encoder reads a token's first MAX_BYTES_PER_TOKEN UTF-8 bytes, which lie
#: within its first as many characters: a token cut there gives the biLM the same input.
MAX_TOKEN_CHARS = MAX_BYTES_PER_TOKEN


def resolve_corpus_files(spec: Union[str, Path], *, setting: str) -> List[Path]:
    """The files named by a path: a file, a directory (its non-hidden files, recursively) or a glob.

    :param setting: the config setting that named the path, for the error message.
    """
    path = Path(spec)
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(
            p for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if not files:
            raise InputError(f"{setting}: directory {path} holds no files")
        return files
    kind = file_kind(path)
    if kind is not None:
        raise InputError(f"{setting}: corpus path {path} is {kind}, not a regular file or a directory")
    if _is_glob(str(spec)):
        files = sorted(Path(p) for p in glob.glob(str(spec), recursive=True) if Path(p).is_file())
        if not files:
            raise InputError(f"{setting}: no file matches {spec}")
        return files
    raise InputError(f"{setting}: corpus path not found: {path}")


def corpus_root(spec: Union[str, Path]) -> Path:
    """Where a corpus path reads: the file or directory it names, or a glob's directory
    (its part before the first wildcard)."""
    path = Path(spec)
    if path.exists() or not _is_glob(str(spec)):
        return path
    fixed = list(itertools.takewhile(lambda part: not _is_glob(part), path.parts))
    return Path(*fixed) if fixed else Path(".")


def _is_glob(text: str) -> bool:
    return any(char in text for char in "*?[")


def file_format(path: Path, configured: str) -> str:
    """`configured` unless it is "auto": then `.jsonl` -> jsonl, `.spacy` -> spacy, else text."""
    if configured != "auto":
        return configured
    return {".jsonl": "jsonl", ".spacy": "spacy"}.get(path.suffix.lower(), "text")


def read_records(
    path: Path, fmt: str, *, text_field: str = "text", start: int = 0, line: int = 0
) -> Iterator[Tuple[Any, int, int]]:
    """Yield ``(text or Doc, next_start, next_line)`` for each record of one file; blank lines are skipped.

    ``start`` is a byte offset (text, jsonl) or a document index (spacy) and ``line`` the lines (documents) before
    it; both come from a previous ``next_start``/``next_line``, so reading can resume mid-file.
    """
    if fmt == "spacy":
        yield from read_docbin(path, start)
        return
    try:
        handle = open(path, "rb")
    except OSError as err:
        raise InputError(f"Cannot read corpus file {path}: {err.strerror}") from None
    with handle:
        handle.seek(start)
        offset = start
        for raw in handle:
            offset += len(raw)
            line += 1
            try:
                text = raw.decode("utf8")
            except UnicodeDecodeError as err:
                raise InputError(f"{path}:{line}: not UTF-8 ({err.reason} at column {err.start + 1})") from None
            if not text.strip():
                continue
            if fmt == "jsonl":
                text = _json_text(text, text_field, f"{path}:{line}")
                if not text.strip():
                    continue
            yield text, offset, line


def _json_text(line: str, field: str, where: str) -> str:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(f"{where}: invalid JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(record, dict) or not isinstance(record.get(field), str):
        raise InputError(f"{where}: expected a JSON object with a string field {field!r}")
    return record[field]


def blank_language(code: str) -> Optional["Language"]:
    """spaCy's blank pipeline of the language `code` (its tokenizer), or None when `code` names
    no language; a language whose tokenizer needs a package not installed is a :class:`ConfigError`."""
    import spacy

    try:
        spacy.util.get_lang_class(code)
    except (ImportError, AttributeError, KeyError, ValueError):  # AttributeError: "en.stop_words", a module
        return None
    try:
        return spacy.blank(code)
    except ImportError as err:  # Japanese needs SudachiPy, Thai PyThaiNLP, ...
        raise ConfigError(
            f"corpus.tokenizer = {code!r}: spaCy's {code!r} tokenizer needs a package that is not installed "
            f"({one_line(err, 200)}); install it, or use {WHITESPACE_TOKENIZER!r}"
        ) from None


class TextSplitter:
    """Turns a record into training sentences: tokenize, optionally split sentences, cut windows.

    :param tokenizer: a spaCy language code whose tokenizer is used, or "whitespace".
    :param split_sentences: split each record (a paragraph) with spaCy's sentencizer.
    :param max_window: longest sentence; longer ones are cut into nearly equal windows.
    """

    def __init__(self, *, tokenizer: str = "en", split_sentences: bool = False, max_window: int = 100) -> None:
        self.max_window = max_window
        self.tokenizer = tokenizer
        self.whitespace = tokenizer == WHITESPACE_TOKENIZER
        self.sentencizer = None
        self.nlp = None
        if not self.whitespace or split_sentences:
            self.nlp = blank_language("xx" if self.whitespace else tokenizer)
            if self.nlp is None:
                raise ConfigError(
                    f"corpus.tokenizer = {tokenizer!r}: not a spaCy language code "
                    f"(for example 'en', 'de') nor {WHITESPACE_TOKENIZER!r}"
                )
            # spaCy refuses texts over 1M characters (E088) to bound a parser's memory; the
            # tokenizer and sentencizer alone are linear in the text, so any record is read.
            self.nlp.max_length = 2**62
            if split_sentences:
                self.sentencizer = self.nlp.add_pipe("sentencizer")

    @property
    def settings(self) -> str:
        """What decides the sentences of a record (the tokenized files's key)."""
        return json.dumps([self.tokenizer, self.sentencizer is not None, self.max_window, MAX_TOKEN_CHARS])

    def __call__(self, record: Any) -> List[Sentence]:
        """:param record: a text string or a spaCy `Doc` (already tokenized)."""
        if isinstance(record, str):
            if self.whitespace:
                tokens = cut_long_tokens(record.split())
                if self.sentencizer is None:
                    return self.windows(tokens)
                from spacy.tokens import Doc

                doc = Doc(self.nlp.vocab, words=tokens)
            else:
                doc = self.nlp.make_doc(record)
        else:
            doc = record
        if self.sentencizer is not None:
            if not doc.has_annotation("SENT_START"):
                doc = self.sentencizer(doc)
            spans = list(doc.sents)
        else:
            spans = [doc]
        sentences: List[Sentence] = []
        for span in spans:
            sentences.extend(self.windows(cut_long_tokens([t.text for t in span if not t.is_space])))
        return sentences

    def windows(self, tokens: Sentence) -> List[Sentence]:
        """Cut a token list into ``ceil(n / max_window)`` windows of nearly equal length."""
        n = len(tokens)
        if n == 0:
            return []
        if n <= self.max_window:
            return [tokens]
        n_windows = -(-n // self.max_window)
        bounds = [round(i * n / n_windows) for i in range(n_windows + 1)]
        return [tokens[a:b] for a, b in zip(bounds, bounds[1:])]


def cut_long_tokens(tokens: Sentence) -> Sentence:
    """`tokens`, each cut to its first :data:`MAX_TOKEN_CHARS` characters (all the
    character encoder reads). A 50 MB token is then 48 characters in the tokenized files,
    the shuffle buffer and every checkpoint, not 50 MB in each."""
    if not tokens or max(map(len, tokens)) <= MAX_TOKEN_CHARS:
        return tokens
    return [token[:MAX_TOKEN_CHARS] for token in tokens]


@dataclass
class StreamPosition:
    """Where a reader stands: epoch, file (index into the epoch's order), place in the file."""

    epoch: int = 0
    file: int = 0
    offset: int = 0
    line: int = 0
    record: int = 0  # records seen this epoch across all files (for record-level sharding)


class CorpusReader:
    """One process's share of a corpus, as sentences, in a seeded order per epoch.

    With at least as many files as processes, each process reads whole files (a different share every epoch);
    otherwise every process reads all files and keeps every ``world_size``-th record. With a `cache`, each file is
    tokenized once (see :mod:`.token_cache`)."""

    def __init__(
        self,
        files: Sequence[Path],
        splitter: TextSplitter,
        *,
        fmt: str = "auto",
        text_field: str = "text",
        seed: int = 0,
        shuffle_files: bool = True,
        rank: int = 0,
        world_size: int = 1,
        shard_files: bool = True,
        name: str = "corpus",
        cache: Optional[TokenizedFiles] = None,
    ) -> None:
        self.files = list(files)
        self.cache = cache
        self.splitter = splitter
        self.fmt = fmt
        self.text_field = text_field
        self.seed = seed
        self.shuffle_files = shuffle_files
        self.rank = rank
        self.world_size = world_size
        self.shard_by_file = shard_files and len(self.files) >= world_size > 1
        self.name = name

    def epoch_files(self, epoch: int) -> List[Path]:
        """The files this process reads in `epoch`, in reading order."""
        order = list(range(len(self.files)))
        if self.shuffle_files:
            order = numpy.random.default_rng([self.seed, epoch]).permutation(len(self.files)).tolist()
        if self.shard_by_file:
            order = order[self.rank :: self.world_size]
        return [self.files[i] for i in order]

    def records(self, position: StreamPosition) -> Iterator[Tuple[List[Sentence], StreamPosition]]:
        """From `position` on, yield each record's sentences and the position after it; never ends."""
        position = StreamPosition(**asdict(position))
        epoch_is_complete = position.file == 0 and position.offset == 0
        produced = False
        while True:
            for sentences, position in self._epoch(position):
                produced = produced or bool(sentences)
                yield sentences, position
            if epoch_is_complete and not produced:
                raise InputError(self._empty_message())
            position = StreamPosition(epoch=position.epoch + 1)
            epoch_is_complete, produced = True, False

    def sentences(self) -> Iterator[Sentence]:
        """One pass over this process's share, in file order (vocabulary, held-out data)."""
        for sentences, _ in self._epoch(StreamPosition()):
            yield from sentences

    def _epoch(self, position: StreamPosition) -> Iterator[Tuple[List[Sentence], StreamPosition]]:
        files = self.epoch_files(position.epoch)
        record = position.record
        for index in range(position.file, len(files)):
            start, line = (position.offset, position.line) if index == position.file else (0, 0)
            for sentences, next_start, next_line in self._file_records(files[index], start, line, record):
                record += 1
                yield sentences, StreamPosition(position.epoch, index, next_start, next_line, record)
            if index + 1 < len(files):
                yield [], StreamPosition(position.epoch, index + 1, 0, 0, record)

    def _file_records(self, path: Path, start: int, line: int, record: int) -> Iterator[CachedRecord]:
        """Each record's sentences (none for another process's record) and the
        position after it; from the tokenized files when `path` has one, else
        tokenized here (and cached, when this reader reads the whole file)."""
        cached = self.cache.records(path, start) if self.cache is not None else None
        if cached is not None:
            for sentences, next_start, next_line in cached:
                yield (sentences if self._mine(record) else []), next_start, next_line
                record += 1
            return
        whole_file = self.cache is not None and start == 0 and (self.shard_by_file or self.world_size == 1)
        with self.cache.writer(path) if whole_file else contextlib.nullcontext() as add_to_cache:
            record_start = start
            fmt = file_format(path, self.fmt)
            for content, next_start, next_line in read_records(
                path, fmt, text_field=self.text_field, start=start, line=line
            ):
                sentences = self.splitter(content) if self._mine(record) else []
                if add_to_cache is not None:
                    add_to_cache(record_start, (sentences, next_start, next_line))
                yield sentences, next_start, next_line
                record, record_start = record + 1, next_start

    def _mine(self, record: int) -> bool:
        return self.shard_by_file or record % self.world_size == self.rank

    def _empty_message(self) -> str:
        names = ", ".join(str(f) for f in self.files[:3]) + (" ..." if len(self.files) > 3 else "")
        if self.world_size > 1:
            return (
                f"{self.name}: no sentences for process {self.rank} of {self.world_size} in {names} "
                f"(the corpus is empty or too small to share)"
            )
        return f"{self.name}: no sentences in {names} (empty corpus)"
