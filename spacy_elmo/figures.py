"""matplotlib figures written to PNG files, without a display."""
from pathlib import Path
from types import ModuleType
from typing import Any, Union

from .output_files import atomic_output_path


def agg_pyplot() -> ModuleType:
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
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
