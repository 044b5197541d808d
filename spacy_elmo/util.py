"""Small helpers shared by the commands."""
import contextlib
import os
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, Union


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


def agg_pyplot() -> ModuleType:
    """matplotlib's pyplot on the Agg backend (files only, no display).

    Raises ImportError when matplotlib is not installed (``spacy-elmo[plot]``).
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def save_figure(figure: Any, path: Union[str, Path], *, dpi: int = 100) -> None:
    """Write a matplotlib ``figure`` to ``path`` as PNG (atomically, see
    :func:`atomic_output_path`) and close it."""
    with atomic_output_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=dpi)
    agg_pyplot().close(figure)
