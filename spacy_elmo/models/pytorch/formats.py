"""The formats of biLM files spacy-elmo reads: each one module, registered in :data:`FORMATS` (and a format
published as archive files, its archive module in :data:`ARCHIVES`).

The first format that claims a path reads it (bilm-tf/AllenNLP, last, claims every path); a saved pipeline's biLM
skeleton is rebuilt by the first format that rebuilds the description the loading format gave.
"""
from pathlib import Path
from typing import Any, Dict, Optional, Protocol, Tuple, cast

from ...errors import WeightsError
from . import elmoformanylangs_archive, elmoformanylangs_format, original_format
from .bilm import ElmoBiLM
from .original_format import PathLike


class ModelFormat(Protocol):
    """What a format module defines."""

    #: How messages name the format.
    NAME: str
    #: Whether pretraining can continue its models (pretraining reads UTF-8 bytes).
    TRAINABLE: bool

    def claims(self, path: PathLike) -> bool:
        """Whether `path` (a file or folder) is a model in this format."""

    def model_files(self, path: Path, options: Optional[Path] = None) -> Tuple[Path, Path]:
        """The (weights, options) files a model is read from, given its path and an options file or None."""

    def load(self, path: PathLike, options: Optional[PathLike] = None) -> ElmoBiLM:
        """The biLM at `path`, every file checked."""

    def describe(self, bilm: ElmoBiLM) -> Optional[Dict[str, Any]]:
        """The skeleton of a biLM this format loaded, as plain data (None for another format's)."""

    def rebuild(self, data: Dict[str, Any]) -> Optional[ElmoBiLM]:
        """The skeleton `describe` gave `data` for, its weights unset (None: another format's data)."""


class ModelArchive(Protocol):
    """What an archive module defines: a published model that is one archive file, unpacked into the model cache."""

    #: The archive files' suffix, and what a user who gave one as a path is told to do.
    SUFFIX: str
    LOCAL_HINT: str

    def archive_members(self, path: Path, shown: str) -> object:
        """Refuse (raise) a file that holds no model of the format (checked before it enters the cache)."""

    def unpack_archive(self, path: Path) -> Path:
        """The model folder unpacked beside the archive `path`, once, loaded before it takes its name."""


FORMATS: Tuple[ModelFormat, ...] = cast(Tuple[ModelFormat, ...], (elmoformanylangs_format, original_format))
ARCHIVES: Tuple[ModelArchive, ...] = cast(Tuple[ModelArchive, ...], (elmoformanylangs_archive,))


def format_of(path: PathLike) -> ModelFormat:
    """The format that reads `path`."""
    return next(fmt for fmt in FORMATS if fmt.claims(path))


def archive_of(path: PathLike) -> Optional[ModelArchive]:
    """The archive module of a file named with its suffix, or None."""
    return next((archive for archive in ARCHIVES if Path(path).suffix == archive.SUFFIX), None)


def load_model(path: PathLike, options: Optional[PathLike] = None) -> ElmoBiLM:
    """A biLM in any format spacy-elmo reads (`options`: an options file where the format reads one)."""
    return format_of(path).load(path, options)


def describe(bilm: ElmoBiLM) -> Dict[str, Any]:
    """The skeleton of `bilm` as the format that loaded it describes it."""
    for fmt in FORMATS:
        data = fmt.describe(bilm)
        if data is not None:
            return data
    raise WeightsError(f"No model format describes a biLM of {type(bilm.token_ids).__name__}: it cannot be saved")


def rebuild(data: Dict[str, Any]) -> ElmoBiLM:
    """The biLM skeleton of a saved pipeline (:func:`describe`)."""
    for fmt in FORMATS:
        bilm = fmt.rebuild(data)
        if bilm is not None:
            return bilm
    raise WeightsError("the serialized elmo model: no model format reads its description")
