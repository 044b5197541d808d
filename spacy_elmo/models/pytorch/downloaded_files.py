"""The check a downloaded model file passes before it enters the cache: a truncated or
wrong file (an HTML error page, say) is refused there, naming its URL. The loader then loads
the new model once (every dataset checked against the options) before any of it stays."""
from pathlib import Path

from ...download import file_name
from ...errors import InputError
from .formats import ARCHIVES, archive_of
from .original_format import read_options

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def verify_download(path: Path, shown: str) -> None:
    """Options must pass every check the loader makes (their biLM's size included); weights be
    an HDF5 file; an archive hold a model of its format. `shown`: the URL, as errors show it."""
    if path.stat().st_size == 0:
        raise InputError(f"{shown} sent an empty file")
    name = file_name(shown)  # a query after the file name changes nothing
    kind, archive = Path(name).suffix, archive_of(name)
    if kind == ".json":
        read_options(path, shown=shown)
    elif kind in (".hdf5", ".h5"):
        with path.open("rb") as handle:
            if handle.read(len(HDF5_SIGNATURE)) != HDF5_SIGNATURE:
                raise InputError(f"{shown} is not an HDF5 file")
    elif archive is not None:
        archive.archive_members(path, shown)
    else:
        kinds = ", ".join((".json", ".hdf5", *(known.SUFFIX for known in ARCHIVES)))
        raise InputError(f"{shown}: not a kind of model file spacy-elmo checks ({kinds}); refused")
