"""Input files read whole or handed to a reader: regular files only, of a bounded size.

A FIFO blocks until a writer comes and a device such as ``/dev/zero`` never ends; a link to a regular file is fine.
Messages name the path, never what the file holds: a link may point at any file the user can read.
"""
import hashlib
import os
import stat
from pathlib import Path
from typing import Type

from .output_files import REGULAR_FILE, file_kind

#: The most a vocabulary file may hold (the published ones: a few MB).
MAX_VOCABULARY_BYTES = 256 << 20


def read_regular_file(path: Path, *, max_bytes: int, error: Type[Exception], what: str) -> bytes:
    """The bytes of `path`, a regular file of at most `max_bytes`; anything else is one
    `error`. `what` names the file in messages ("Vocabulary"). The file is checked
    once opened, so what is checked is what is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without waiting for a writer
    except FileNotFoundError:
        raise error(f"{what} file not found: {path}") from None
    except OSError as err:
        raise error(f"Cannot read {what.lower()} file {path}: {err.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # checked before fdopen, which refuses a directory with its own error
        os.close(fd)
        raise error(f"{what} path {path} is {file_kind(path)}, not a regular file")
    with os.fdopen(fd, "rb") as file:
        try:
            data = b"" if info.st_size > max_bytes else file.read(max_bytes + 1)  # + 1: one that grew past it
        except OSError as err:
            raise error(f"Cannot read {what.lower()} file {path}: {err.strerror}") from None
    if max(info.st_size, len(data)) > max_bytes:
        raise error(f"{path}: more than {max_bytes:,} bytes, too large for {what.lower()} files")
    return data


def check_regular_file(path: Path, error: Type[Exception], what: str) -> None:
    """Refuse a FIFO or device before a reader opens `path`: it would block forever or never end."""
    kind = file_kind(path)
    if kind not in (None, REGULAR_FILE):
        raise error(f"{what} path {path} is {kind}, not a regular file")


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read a MB at a time."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
