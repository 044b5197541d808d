"""One run per output directory: an OS lock that dies with its process.

``flock`` on the directory itself: no lock file to clean up, and a killed run (even by SIGKILL) leaves no stale lock.
"""
import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator, Optional

from .errors import SpacyElmoError, one_line


class DirectoryInUseError(SpacyElmoError):
    """Another process holds the directory."""


@contextlib.contextmanager
def hold_directory(path: Path, *, what: str = "run") -> Iterator[None]:
    """Hold `path` (created when missing) until the block ends or this process dies.

    Raises :class:`DirectoryInUseError` naming the other process when it is held.
    A directory this call created and that is still empty at the end is removed.
    """
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DirectoryInUseError(
                f"{path} is in use by another {what} ({_holder(path) or 'another process'}); "
                f"wait for it to end, or choose another output directory"
            ) from None
        yield
    finally:
        os.close(fd)
        if created:
            with contextlib.suppress(OSError):
                path.rmdir()  # only succeeds when nothing was written


def _holder(path: Path) -> Optional[str]:
    """'process PID: COMMAND' of the process holding `path`'s flock (Linux: /proc/locks)."""
    inode = path.stat().st_ino
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; blocked waiters are marked "->".
        if len(fields) < 6 or fields[1] != "FLOCK" or "->" in fields:
            continue
        pid, device_inode = fields[4], fields[5]
        if device_inode.rsplit(":", 1)[-1] == str(inode) and pid.isdigit():
            return f"process {pid}: {_command(int(pid))}".rstrip(": ")
    return None


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return one_line(b" ".join(raw.split(b"\0")).decode("utf8", "replace"), limit=200)
