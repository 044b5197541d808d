"""Output files that are safe to write: checked before the work starts, written to
a temporary name and renamed when complete, and cleaned up after a killed run."""
import contextlib
import os
import re
import resource
import secrets
import shutil
import socket
import stat
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Optional, Union

from .errors import SpacyElmoError
from .sigterm import raise_if_terminated

PathLike = Union[str, Path]


@contextlib.contextmanager
def atomic_output_path(path: PathLike, *, size: int = 0, what: str = "Output") -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it to `path` only on success.

    `size`: about the output's bytes; when given, :func:`check_space` runs before anything is written. The name
    ``.NAME.spacy-elmo-PID@HOST-RANDOM.tmp`` (NAME cut to 255 bytes) lets :func:`remove_stale_temp_files` remove one a
    killed run (SIGKILL) left. An existing `path` that is not a regular file (a device, a FIFO) is never replaced."""
    path = Path(path)
    check_replaceable(path, what=what)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SpacyElmoError(f"{what} {path}: cannot create the directory {path.parent} ({err.strerror})") from None
    # Named before it exists, so a stop (KeyboardInterrupt) at any point after this line leaves no file behind.
    tmp = path.parent / f".{_temp_stem(path.name)}.spacy-elmo-{os.getpid()}@{_host()}-{secrets.token_hex(4)}.tmp"
    try:
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        if size:
            check_space(tmp, size, what=what, name=path)
        yield tmp
        raise_if_terminated()  # never publish an output after a stop request
        os.chmod(tmp, 0o666 & ~_umask())  # created 0600, as mkstemp does
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


# RANDOM: eight characters (hex here; tempfile's letters in files of earlier versions).
_TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.spacy-elmo-(?P<pid>\d+)@(?P<host>[^/]+)-[a-z0-9_]{8}\.tmp$")
#: The longest file name (bytes) of Linux, macOS and Windows file systems.
_NAME_MAX = 255


def _temp_stem(name: str) -> str:
    """`name` as its temporary file's name holds it: cut (the same on every run of this
    host, whatever its PID) so that the whole name fits in :data:`_NAME_MAX` bytes."""
    room = _NAME_MAX - len(os.fsencode(f"..spacy-elmo-{'9' * 10}@{_host()}-12345678.tmp"))
    return os.fsdecode(os.fsencode(name)[:room])


def remove_stale_temp_files(directory: PathLike, names: Optional[Iterable[str]]) -> int:
    """Delete the temporary files of :func:`atomic_output_path` in `directory` for
    the outputs `names` (None: any output, for a directory only we write) whose
    process is gone (a run killed while writing): only those this host's dead
    processes left, never a file of another program. Returns how many were removed."""
    directory = Path(directory)
    if not directory.is_dir():
        return 0
    wanted = None if names is None else {_temp_stem(name) for name in names}
    removed = 0
    for candidate in directory.iterdir():
        match = _TEMP_NAME.match(candidate.name)
        if match is None or (wanted is not None and match["name"] not in wanted):
            continue
        if match["host"] != _host() or _process_alive(int(match["pid"])) or not candidate.is_file():
            continue
        with contextlib.suppress(FileNotFoundError):
            candidate.unlink()
            removed += 1
    return removed


def check_output_file(
    path: PathLike, *, inputs: Iterable[PathLike] = (), others: Iterable[PathLike] = (), what: str = "Output"
) -> None:
    """Fail early (before any work) when `path` cannot become a new output file:
    it is one of `inputs`, or inside one that is a directory (a model folder, a
    pipeline), or one of the command's `others` outputs (also through links), a
    directory or another file that is not a regular file (:func:`check_replaceable`),
    or its directory cannot be created or written."""
    path = Path(path)
    if file_kind(path) == DIRECTORY:
        raise SpacyElmoError(f"{what} path is a directory: {path} (give a file name, e.g. {path / 'embeddings.hdf5'})")
    check_replaceable(path, what=f"{what} path")
    for source in map(Path, inputs):
        if _same_file(path, source):
            raise SpacyElmoError(
                f"{what} path {path} is the input {source}: refusing to overwrite it (give another output path)"
            )
        if file_kind(source) == DIRECTORY and source.resolve() in path.resolve().parents:
            raise SpacyElmoError(
                f"{what} path {path} is inside the input {source}: refusing to write among its files "
                "(give a path outside it)"
            )
    for other in others:
        if _same_file(path, Path(other)):
            raise SpacyElmoError(f"{what} path {path} is also the output {other}: give each output its own path")
    _check_can_create_in(path.parent, what=what, target=path)


def check_replaceable(path: PathLike, *, what: str = "Output", fix: str = "give another path") -> None:
    """Fail when `path` exists and is not a regular file (a directory, a device, a FIFO,
    a socket; a link is followed): an output renamed over it would replace it."""
    kind = file_kind(path)
    if kind not in (None, REGULAR_FILE):
        raise SpacyElmoError(f"{what} {path} is {kind}, not a regular file: refusing to replace it ({fix})")


#: What :func:`file_kind` says of a regular file and of a directory.
REGULAR_FILE, DIRECTORY = "a regular file", "a directory"
_KINDS = (
    (stat.S_ISREG, REGULAR_FILE), (stat.S_ISDIR, DIRECTORY), (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
)


def file_kind(path: PathLike) -> Optional[str]:
    """What is at `path` (a link followed): "a regular file", "a directory", "a FIFO
    (named pipe)", ...; None when nothing is. A path the system cannot look up (too
    long, a loop of links) raises :class:`SpacyElmoError`."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        raise SpacyElmoError(f"{shortened(path)}: {err.strerror}") from None
    return next((kind for test, kind in _KINDS if test(mode)), "not a file")


def shortened(path: PathLike, limit: int = 120) -> str:
    """`path` for a message: a name over `limit` characters keeps its start and end."""
    text = str(path)
    half = limit // 2
    return text if len(text) <= limit else f"{text[:half]}...{text[-(half - 3):]}"


def check_output_dir(
    path: PathLike, *, inputs: Optional[Mapping[str, PathLike]] = None, what: str = "Output directory"
) -> None:
    """Fail early when `path` cannot be (or become) a writable directory, or when it is,
    lies inside or holds one of `inputs` (setting name: file or directory), whose next
    reading would then take in the outputs."""
    path = Path(path)
    kind = file_kind(path)
    if kind not in (None, DIRECTORY):
        kind = "a file" if kind == REGULAR_FILE else kind
        raise SpacyElmoError(f"{what} {path} is {kind}, not a directory (give a directory path)")
    _check_can_create_in(path, what=what, target=path)
    for name, source in (inputs or {}).items():
        relation = _relation(path.resolve(), Path(source).resolve())
        if relation is not None:
            raise SpacyElmoError(
                f"{what} {path} {relation} {name} ({source}): its outputs would be read as {name} next time; "
                f"choose an output directory apart from it"
            )


def _relation(directory: Path, other: Path) -> Optional[str]:
    """How `directory` stands to `other` (both resolved): "is", "is inside", "holds", or None: apart."""
    if directory == other:
        return "is"
    if other in directory.parents:
        return "is inside"
    if directory in other.parents:
        return "holds"
    return None


def _check_can_create_in(directory: Path, *, what: str, target: Path) -> None:
    existing = directory.absolute()
    while file_kind(existing) is None:
        existing = existing.parent
    if file_kind(existing) != DIRECTORY:
        raise SpacyElmoError(f"{what} {target}: {existing} is a file, not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".spacy-elmo-probe-", dir=existing)
    except OSError as err:
        raise SpacyElmoError(f"{what} {target}: cannot write in {existing} ({err.strerror})") from None
    os.close(fd)
    os.unlink(probe)


#: Room left for an HDF5 file's own bookkeeping (headers, the index of its datasets).
HDF5_OVERHEAD_BYTES = 1 << 20


def bytes_writable(path: PathLike) -> int:
    """How many more bytes the file `path` (existing or not) may take: the free space
    of its file system, capped by this process's file-size limit (``ulimit -f``)."""
    path = Path(path)
    existing = path.absolute()
    while not existing.exists():
        existing = existing.parent
    directory = existing if existing.is_dir() else existing.parent
    room = shutil.disk_usage(directory).free
    limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if limit != resource.RLIM_INFINITY:
        size = path.stat().st_size if path.is_file() else 0
        room = min(room, max(0, limit - size))
    return room


def check_space(path: PathLike, needed: int, *, what: str = "Output", name: Optional[PathLike] = None) -> None:
    """Fail with one line when `path` cannot grow by `needed` bytes (a full disk or
    a file-size limit). HDF5 must never meet the limit itself: its write errors
    surface in object finalizers and can crash the process instead of raising.
    `name`: the path to show (the final name of a temporary file)."""
    room = bytes_writable(path)
    if needed > room:
        raise SpacyElmoError(
            f"{what} {name or path}: not enough space: needs about {_megabytes(needed)}, "
            f"{_megabytes(room)} can be written there (free disk space or the file-size limit); "
            f"free some space or write elsewhere"
        )


def _megabytes(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:,.1f} MB"


def _same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` are one file: the same file on disk, or, where one is not
    there yet, the same path once links are resolved."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a loop of links
        return False


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _host() -> str:
    """This machine's name as it appears in temporary file names."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "localhost"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
