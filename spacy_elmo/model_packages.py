"""The files of spacy-elmo's own models, which install as Python packages built from this repository.

A model's part (its biLM; its softmax and vocabulary) is found whole in one place: its installed package, else that
package's folder in the checkout (an editable install), else the model's folder in the cache, checked by SHA-256.
One error names every file missing and what installs it.
"""
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

from .errors import InputError
from .input_files import file_sha256

#: The packages of spacy-elmo's own models in a checkout (where spacy-elmo runs from one).
CHECKOUT_MODELS = Path(__file__).resolve().parent.parent / "models"


@dataclass(frozen=True)
class ModelPart:
    """Files of one of spacy-elmo's own models that install together, in one package:
    spacy-elmo itself (`project` None), or the one built from the checkout's models/`project`."""

    module: str  # the package's import name
    folder: str  # the files' folder inside it
    checksums: Tuple[Tuple[str, str], ...]  # (file name, SHA-256), in the order callers get them
    project: Optional[str] = None

    def file_names(self) -> Tuple[str, ...]:
        return tuple(name for name, _ in self.checksums)

    def installed_folders(self) -> Iterator[Path]:
        """Where its installed package, or the checkout spacy-elmo runs from, keeps the files."""
        spec = importlib.util.find_spec(self.module)
        if spec is not None and spec.submodule_search_locations:
            yield Path(list(spec.submodule_search_locations)[0]) / self.folder
        if self.project is not None:
            yield CHECKOUT_MODELS / self.project / self.module / self.folder

    def install_hint(self) -> str:
        return f"./models/{self.project}" if self.project else "spacy-elmo"


def part_files(name: str, parts: Sequence[ModelPart], cache_folder: Path) -> List[Path]:
    """The files of the model `name`'s `parts`, in order, or one error that names every
    file missing, the packages that hold them and the cache folder they may be put in."""
    found: List[Path] = []
    missing: List[str] = []
    lacking: List[ModelPart] = []
    for part in parts:
        folder = _part_folder(name, part, cache_folder)
        if folder is not None:
            found += [folder / file_name for file_name in part.file_names()]
        else:
            missing += [file_name for file_name in part.file_names() if not (cache_folder / file_name).is_file()]
            lacking.append(part)
    if missing:
        them = "it" if len(missing) == 1 else "them"
        projects = " ".join(part.install_hint() for part in lacking if part.project)
        installs = [f"`pip install {projects}` in a clone of spacy-elmo installs {them}"] if projects else []
        if any(part.project is None for part in lacking):
            installs.append("reinstall spacy-elmo")
        raise InputError(
            f"{name}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed; "
            f"{', or '.join(installs)}, or place {them} in {cache_folder}"
        )
    return found


def _part_folder(name: str, part: ModelPart, cache_folder: Path) -> Optional[Path]:
    for folder in part.installed_folders():
        if all((folder / file_name).is_file() for file_name in part.file_names()):
            return folder
    if not all((cache_folder / file_name).is_file() for file_name in part.file_names()):
        return None
    for file_name, checksum in part.checksums:  # put there by hand: they must be this model's
        path = cache_folder / file_name
        if file_sha256(path) != checksum:
            raise InputError(
                f"{path} is not {name}'s {file_name} (its SHA-256 differs); put {name}'s own there, or "
                f"delete it and install it: pip install {part.install_hint()}"
            )
    return cache_folder

