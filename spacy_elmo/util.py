"""Small helpers shared by the commands."""
import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator, Union


@contextlib.contextmanager
def atomic_output_path(path: Union[str, Path]) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it to `path` only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600 files
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
