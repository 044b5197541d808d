"""ELMo models by name: the English biLM shipped in this package, and the published
AllenNLP/bilm-tf models, downloaded on first use into a cache directory.

    model_files("english-compact")  # in the installed package, offline
    model_files("small")            # downloaded once, then read from the cache
    locate_vectors("english-compact")  # the floret vectors shipped beside it (spaCy format)

``SPACY_ELMO_CACHE`` (default ``$XDG_CACHE_HOME/spacy-elmo``, else ``~/.cache/spacy-elmo``)
and ``SPACY_ELMO_BASE_URL`` (default AllenNLP's public bucket) change where published
models are kept and fetched from; both can also be given per call.
"""
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

from .download import Verifier, download
from .errors import InputError

PathLike = Union[str, Path]

DEFAULT_BASE_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
RESOURCES = Path(__file__).parent / "resources"


@dataclass(frozen=True)
class NamedModel:
    name: str
    lang: str
    description: str
    # Shipped: the folder under spacy_elmo/resources. Published: the folder on the server.
    folder: str
    shipped: bool
    # Shipped static vectors trained on the model's text: a spaCy vectors directory
    # (`spacy init vectors --mode floret`) in the model's folder, under this name.
    vectors_folder: Optional[str] = None

    def file_names(self) -> Tuple[str, str]:
        """(options, weights) file names, as the publisher names them."""
        if self.shipped:
            return "options.json", "weights.hdf5"
        return f"elmo_{self.folder}_options.json", f"elmo_{self.folder}_weights.hdf5"


def _published(name: str, folder: str, description: str) -> NamedModel:
    return NamedModel(name=name, lang="en", description=description, folder=folder, shipped=False)


NAMED_MODELS: Dict[str, NamedModel] = {
    model.name: model
    for model in (
        NamedModel(
            name="english-compact", lang="en", folder="english_compact", shipped=True, vectors_folder="vectors",
            description="spacy-elmo's English biLM (LSTM 2x512, projection 128; Wikipedia, "
            "Stack Exchange, Gutenberg), shipped in the package",
        ),
        _published("small", "2x1024_128_2048cnn_1xhighway", "AllenNLP small (13.6M parameters, 1B Word)"),
        _published("medium", "2x2048_256_2048cnn_1xhighway", "AllenNLP medium (28.0M parameters, 1B Word)"),
        _published("original", "2x4096_512_2048cnn_2xhighway", "AllenNLP original (93.6M parameters, 1B Word)"),
        _published(
            "original-5.5b", "2x4096_512_2048cnn_2xhighway_5.5B",
            "AllenNLP original trained on 5.5B tokens (Wikipedia, WMT news)",
        ),
    )
}

#: The biLM a pipeline gets when no weights are given, per language: the shipped ones.
DEFAULT_MODELS: Dict[str, str] = {model.lang: model.name for model in NAMED_MODELS.values() if model.shipped}


def default_model(lang: str) -> str:
    """The name of the default biLM for a spaCy language code, or a clear error."""
    if lang not in DEFAULT_MODELS:
        raise InputError(
            f"spacy-elmo ships no biLM for language {lang!r} (only for: "
            f"{', '.join(sorted(DEFAULT_MODELS))}). Give the elmo component weights (paths.elmo_model: "
            "a directory with options.json and weights.hdf5), e.g. one trained with "
            "`python -m spacy_elmo pretrain` on text in your language"
        )
    return DEFAULT_MODELS[lang]


def is_downloaded(model: PathLike) -> bool:
    """Whether `model` names a published model (kept in the download cache), not a path."""
    return not Path(model).exists() and str(model) in NAMED_MODELS and not NAMED_MODELS[str(model)].shipped


def cache_dir(override: Optional[PathLike] = None) -> Path:
    if override is not None:
        return Path(override)
    if os.environ.get("SPACY_ELMO_CACHE"):
        return Path(os.environ["SPACY_ELMO_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "spacy-elmo"


def base_url(override: Optional[str] = None) -> str:
    return (override or os.environ.get("SPACY_ELMO_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def model_files(
    name: str, *, verify: Verifier, cache: Optional[PathLike] = None, url: Optional[str] = None
) -> Tuple[Path, Path]:
    """(options.json, weights.hdf5) of a named model; published ones are downloaded
    into the cache on first use (each file kept once `verify` accepts it) and read
    from it afterwards."""
    if name not in NAMED_MODELS:
        raise InputError(f"Unknown ELMo model name {name!r}; known names: {', '.join(NAMED_MODELS)}")
    model = NAMED_MODELS[name]
    options_name, weights_name = model.file_names()
    if model.shipped:
        folder = RESOURCES / model.folder
        paths = (folder / options_name, folder / weights_name)
        missing = [str(path) for path in paths if not path.exists()]
        if missing:
            raise InputError(f"The installed spacy-elmo lacks its model files: {', '.join(missing)}")
        return paths
    folder = cache_dir(cache) / model.folder
    remote = f"{base_url(url)}/{model.folder}"
    what = f"ELMo model {name!r}"
    new_folders = [path for path in (folder, *folder.parents) if not path.exists()]
    new_files = [folder / file_name for file_name in (options_name, weights_name) if not (folder / file_name).exists()]
    try:
        options = download(f"{remote}/{options_name}", folder / options_name, verify=verify, what=what)
        weights = download(f"{remote}/{weights_name}", folder / weights_name, verify=verify, what=what)
    except BaseException:
        # A model arrives whole or not at all: nothing of a failed first download stays in the cache.
        for path in [*new_files, *new_folders]:  # files, then folders deepest first
            with contextlib.suppress(OSError):
                path.unlink() if path in new_files else path.rmdir()
        raise
    return options, weights


def locate_model(
    model: PathLike, *, verify: Verifier, cache: Optional[PathLike] = None, url: Optional[str] = None
) -> Tuple[Path, Optional[Path]]:
    """(weights file or directory, options.json or None) of a path or a model name.

    An existing file or directory wins over a name; a name is looked up in
    :data:`NAMED_MODELS` (and a published model downloaded if need be).
    """
    path = Path(model)
    if path.exists():
        return path, None
    if str(model) in NAMED_MODELS:
        options, weights = model_files(str(model), verify=verify, cache=cache, url=url)
        return weights, options
    raise InputError(
        f"Weights file not found: {model} (no such file or directory, and not an ELMo model name: "
        f"{', '.join(NAMED_MODELS)})"
    )


def default_vectors(lang: str) -> str:
    """The name of the static vectors shipped for a spaCy language code (those of its
    default biLM, :data:`DEFAULT_MODELS`), or a clear error."""
    with_vectors = {code: name for code, name in DEFAULT_MODELS.items() if NAMED_MODELS[name].vectors_folder}
    if lang not in with_vectors:
        raise InputError(
            f"spacy-elmo ships no static vectors for language {lang!r} (only for: {', '.join(sorted(with_vectors))}). "
            "Give paths.vectors: a directory from `spacy init vectors`, e.g. floret vectors trained on "
            "your text by the project's train-vectors step"
        )
    return with_vectors[lang]


def locate_vectors(vectors: PathLike) -> Path:
    """The spaCy vectors directory of a path, or of a shipped model's name (its
    static vectors); an existing path wins over a name."""
    path = Path(vectors)
    if path.exists():
        return path
    named = {name: model for name, model in NAMED_MODELS.items() if model.vectors_folder}
    if str(vectors) not in named:
        raise InputError(
            f"Vectors not found: {vectors} (no such directory, and not the name of shipped vectors: "
            f"{', '.join(named)})"
        )
    model = named[str(vectors)]
    folder = RESOURCES / model.folder / str(model.vectors_folder)
    if not (folder / "vocab" / "vectors").is_file():
        raise InputError(f"The installed spacy-elmo lacks its vectors files: {folder}")
    return folder
