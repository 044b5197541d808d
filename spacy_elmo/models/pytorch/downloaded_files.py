"""The check a downloaded model file passes before it enters the cache: a truncated or
wrong file (an HTML error page, say) is refused there, not on every later load."""
from pathlib import Path
from typing import Any, Iterator, List, Tuple, Union

from ...download import file_name
from ...errors import InputError, SpacyElmoError, one_line
from .formats import ARCHIVES, archive_of
from .original_format import MAX_PARAMETERS, declared_values, read_options

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
# Values read at once when a downloaded HDF5 file is checked (16 MB of float32).
SLAB_VALUES = 1 << 22


def verify_download(path: Path, shown: str) -> None:
    """Options must pass every check the loader makes (their biLM's size included);
    weights be an HDF5 file whose every dataset reads; an archive hold a model of its format
    of a size spacy-elmo loads. `shown`: the URL, as errors show it."""
    if path.stat().st_size == 0:
        raise InputError(f"{shown} sent an empty file")
    kind = Path(file_name(shown)).suffix  # a query after the file name changes nothing
    archive = archive_of(file_name(shown))
    if kind == ".json":
        read_options(path, shown=shown)
    elif kind in (".hdf5", ".h5"):
        with path.open("rb") as handle:
            if handle.read(len(HDF5_SIGNATURE)) != HDF5_SIGNATURE:
                raise InputError(f"{shown} is not an HDF5 file")
        _read_every_dataset(path, shown)
    elif archive is not None:
        archive.archive_members(path, shown)
    else:
        kinds = ", ".join((".json", ".hdf5", *(archive.SUFFIX for archive in ARCHIVES)))
        raise InputError(f"{shown}: not a kind of model file spacy-elmo checks ({kinds}); refused")


def _read_every_dataset(path: Path, shown: str) -> None:
    """Read every dataset, a slab at a time, once what they declare in all fits the
    largest biLM spacy-elmo loads: a file of a few KB can declare any size."""
    import h5py

    try:
        with h5py.File(path, "r") as handle:
            items: List[Tuple[str, Any]] = []
            handle.visititems(lambda name, item: items.append((name, item)))
            datasets = {name: item for name, item in items if isinstance(item, h5py.Dataset)}
            if not datasets:
                raise InputError(f"{shown} is an HDF5 file without datasets, not biLM weights")
            declared = sum(declared_values(dataset) for dataset in datasets.values())
            if declared > MAX_PARAMETERS:
                raise InputError(
                    f"{shown} declares {declared:,} values in its datasets, more than the {MAX_PARAMETERS:,} "
                    "parameters of the largest biLM spacy-elmo loads; refused before reading them"
                )
            for name, dataset in datasets.items():
                if dataset.external or dataset.is_virtual:  # reading it would read another (local) file
                    raise InputError(f"{shown}: dataset '{name}' keeps its data in other files; refused")
                for rows in _slabs(dataset):
                    dataset[rows]
    except SpacyElmoError:
        raise
    except (OSError, RuntimeError, ValueError) as err:
        raise InputError(f"{shown} is a damaged HDF5 file ({one_line(err)})") from None


def _slabs(dataset: Any) -> Iterator[Union[slice, Tuple[()]]]:
    """Selections of about :data:`SLAB_VALUES` values that together cover `dataset`:
    runs of rows of its first axis (a scalar or empty one: all of it)."""
    if not dataset.shape:
        yield ()
        return
    row_values = max(1, (dataset.size or 0) // max(1, dataset.shape[0]))
    step = max(1, SLAB_VALUES // row_values)
    for start in range(0, dataset.shape[0], step):
        yield slice(start, start + step)
