"""ELMo models by name: the English and Portuguese biLMs shipped in this package, and published models
(AllenNLP/bilm-tf's, contributed ones, ELMoForManyLangs'), downloaded on first use into
a cache directory.

    model_files("english-compact")  # in the installed package, offline
    model_files("small", verify=check)  # downloaded once (kept when `check` accepts it)
    locate_vectors("english-compact")  # the floret vectors shipped beside it (spaCy format)

``SPACY_ELMO_CACHE`` (default ``$XDG_CACHE_HOME/spacy-elmo``, else ``~/.cache/spacy-elmo``)
and ``SPACY_ELMO_BASE_URL`` (default: each publisher's own; a mirror keeps their paths)
change where published models are kept and fetched from; both can also be given per call.
"""
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple, Union

from .download import Verifier, download
from .errors import InputError

PathLike = Union[str, Path]
#: Accepts a model's files (raises otherwise) once they are all downloaded.
ModelCheck = Callable[[Tuple[Path, ...]], None]

ALLENNLP_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
NLPL_URL = "http://vectors.nlpl.eu/repository"
TSYSTEMS_URL = "https://github.com/t-systems-on-site-services-gmbh/german-elmo-model/releases/download"
RESOURCES = Path(__file__).parent / "resources"


@dataclass(frozen=True)
class NamedModel:
    name: str
    lang: str
    description: str
    # Shipped: the folder under spacy_elmo/resources. Published: the folder in the cache.
    folder: str
    shipped: bool = False
    # Published: each file's path under `publisher_url` (options and weights, or one archive).
    files: Tuple[str, ...] = ()
    publisher_url: str = ALLENNLP_URL
    # Shipped static vectors trained on the model's text: a spaCy vectors directory
    # (`spacy init vectors --mode floret`) in the model's folder, under this name.
    vectors_folder: Optional[str] = None

    def file_names(self) -> Tuple[str, ...]:
        """The files' names, as the publisher names them (and the cache keeps them)."""
        if self.shipped:
            return "options.json", "weights.hdf5"
        return tuple(Path(path).name for path in self.files)


def _allennlp(name: str, folder: str, description: str) -> NamedModel:
    files = (f"{folder}/elmo_{folder}_options.json", f"{folder}/elmo_{folder}_weights.hdf5")
    return NamedModel(name=name, lang="en", description=description, folder=folder, files=files)


def _contributed(
    name: str, lang: str, options: str, weights: str, description: str, url: str = ALLENNLP_URL
) -> NamedModel:
    return NamedModel(
        name=name, lang=lang, description=description, folder=name, files=(options, weights), publisher_url=url
    )


#: ELMoForManyLangs (Che et al. 2018, CoNLL 2018 shared task): language code, language and
#: the number of its archive in the NLPL repository (collection 11).
ELMOFORMANYLANGS = (
    ("ar", "Arabic", 136), ("bg", "Bulgarian", 137), ("ca", "Catalan", 138), ("cs", "Czech", 139),
    ("cu", "Old Church Slavonic", 140), ("da", "Danish", 141), ("de", "German", 142), ("el", "Greek", 143),
    ("en", "English", 144), ("es", "Spanish", 145), ("et", "Estonian", 146), ("eu", "Basque", 147),
    ("fa", "Persian", 148), ("fi", "Finnish", 149), ("fr", "French", 150), ("ga", "Irish", 151),
    ("gl", "Galician", 152), ("grc", "Ancient Greek", 153), ("he", "Hebrew", 154), ("hi", "Hindi", 155),
    ("hr", "Croatian", 156), ("hu", "Hungarian", 157), ("id", "Indonesian", 158), ("it", "Italian", 159),
    ("ja", "Japanese", 160), ("ko", "Korean", 161), ("la", "Latin", 162), ("lv", "Latvian", 163),
    ("nl", "Dutch", 164), ("nb", "Norwegian Bokmål", 165), ("nn", "Norwegian Nynorsk", 166), ("pl", "Polish", 167),
    ("pt", "Portuguese", 168), ("ro", "Romanian", 169), ("ru", "Russian", 170), ("sk", "Slovak", 171),
    ("sl", "Slovenian", 172), ("sv", "Swedish", 173), ("tr", "Turkish", 174), ("ug", "Uyghur", 175),
    ("uk", "Ukrainian", 176), ("ur", "Urdu", 177), ("vi", "Vietnamese", 178), ("zh", "Chinese (traditional)", 179),
)


def _elmoformanylangs(lang: str, language: str, number: int) -> NamedModel:
    return NamedModel(
        name=f"elmoformanylangs-{lang}", lang=lang, folder=f"elmoformanylangs/{lang}", files=(f"11/{number}.zip",),
        publisher_url=NLPL_URL,
        description=f"ELMoForManyLangs {language} (LSTM 2x4096, projection 512, word embedding; Wikipedia and Common Crawl)",
    )


NAMED_MODELS: Dict[str, NamedModel] = {
    model.name: model
    for model in (
        NamedModel(
            name="english-compact", lang="en", folder="english_compact", shipped=True, vectors_folder="vectors",
            description="spacy-elmo's English biLM (LSTM 2x512, projection 128; Wikipedia, "
            "Stack Exchange, Gutenberg), shipped in the package",
        ),
        NamedModel(
            name="portuguese-compact", lang="pt", folder="portuguese_compact", shipped=True,
            description="spacy-elmo's Portuguese biLM (LSTM 2x512, projection 128; literature, laws, "
            "UD text, in UD Portuguese-Bosque's words), shipped in the package",
        ),
        _allennlp("small", "2x1024_128_2048cnn_1xhighway", "AllenNLP small (13.6M parameters, 1B Word)"),
        _allennlp("medium", "2x2048_256_2048cnn_1xhighway", "AllenNLP medium (28.0M parameters, 1B Word)"),
        _allennlp("original", "2x4096_512_2048cnn_2xhighway", "AllenNLP original (93.6M parameters, 1B Word)"),
        _allennlp(
            "original-5.5b", "2x4096_512_2048cnn_2xhighway_5.5B",
            "AllenNLP original trained on 5.5B tokens (Wikipedia, WMT news)",
        ),
        _contributed(
            "pubmed", "en", "contributed/pubmed/elmo_2x4096_512_2048cnn_2xhighway_options.json",
            "contributed/pubmed/elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5",
            "AllenNLP's original size trained on PubMed (biomedical English)",
        ),
        _contributed(
            "portuguese-wikipedia", "pt", "contributed/pt/wikipedia/options.json",
            "contributed/pt/wikipedia/elmo_pt_weights.hdf5",
            "Portuguese, Wikipedia (Federal University of Goiás; listed by AllenNLP)",
        ),
        _contributed(
            "portuguese-brwac", "pt", "contributed/pt/brwac/options.json",
            "contributed/pt/brwac/elmo_pt_weights_dgx1.hdf5",
            "Portuguese, brWaC web corpus (Federal University of Goiás; listed by AllenNLP)",
        ),
        _contributed(
            "german-tsystems", "de", "files_1/options.json", "files_1/weights.hdf5",
            "German, Wikipedia and comments (T-Systems on site services, BSD-2-Clause)", url=TSYSTEMS_URL,
        ),
        *(_elmoformanylangs(*entry) for entry in ELMOFORMANYLANGS),
    )
}

#: The biLM a pipeline gets when no weights are given, per language: the shipped ones.
DEFAULT_MODELS: Dict[str, str] = {model.lang: model.name for model in NAMED_MODELS.values() if model.shipped}


def default_model(lang: str) -> str:
    """The name of the default biLM for a spaCy language code, or a clear error."""
    if lang not in DEFAULT_MODELS:
        published = [model.name for model in NAMED_MODELS.values() if model.lang == lang]
        hint = f"published ones by name: {', '.join(published)}; " if published else ""
        raise InputError(
            f"spacy-elmo ships no biLM for language {lang!r} (only for: "
            f"{', '.join(sorted(DEFAULT_MODELS))}). Give the elmo component weights (paths.elmo_model: "
            f"{hint}a directory with options.json and weights.hdf5), or train one with "
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


def base_url(model: NamedModel, override: Optional[str] = None) -> str:
    """Where `model`'s files are fetched from: `override`, ``SPACY_ELMO_BASE_URL`` (a
    mirror that keeps the publishers' paths), or its publisher's URL."""
    return (override or os.environ.get("SPACY_ELMO_BASE_URL") or model.publisher_url).rstrip("/")


def file_url(base: str, path: str) -> str:
    """The URL of `path` under `base`, placed before the base's query and fragment (a
    mirror's token or signature is for every file)."""
    head = base.split("?", 1)[0].split("#", 1)[0]
    return f"{head.rstrip('/')}/{path}{base[len(head):]}"


def model_files(
    name: str, *, verify: Verifier, check: Optional[ModelCheck] = None,
    cache: Optional[PathLike] = None, url: Optional[str] = None,
) -> Tuple[Path, ...]:
    """The files of a named model, in :meth:`NamedModel.file_names` order: (options.json,
    weights.hdf5), or an ELMoForManyLangs archive. Published ones are downloaded into the
    cache on first use (each file kept once `verify` accepts it, and all of them once
    `check` accepts the model they make) and read from it afterwards."""
    if name not in NAMED_MODELS:
        raise InputError(f"Unknown ELMo model name {name!r}; known names: {known_names()}")
    model = NAMED_MODELS[name]
    if model.shipped:
        folder = RESOURCES / model.folder
        paths = tuple(folder / file_name for file_name in model.file_names())
        missing = [str(path) for path in paths if not path.exists()]
        if missing:
            raise InputError(f"The installed spacy-elmo lacks its model files: {', '.join(missing)}")
        return paths
    folder = cache_dir(cache) / model.folder
    remote = base_url(model, url)
    what = f"ELMo model {name!r}"
    new_folders = [path for path in (folder, *folder.parents) if not path.exists()]
    targets = [folder / file_name for file_name in model.file_names()]
    new_files = [path for path in targets if not path.exists()]
    try:
        files = tuple(
            download(file_url(remote, path), target, verify=verify, what=what)
            for path, target in zip(model.files, targets)
        )
        if new_files and check is not None:
            check(files)
        return files
    except BaseException:
        # A model arrives whole or not at all: nothing of a failed first download stays in the cache.
        for path in [*new_files, *new_folders]:  # files, then folders deepest first
            with contextlib.suppress(OSError):
                path.unlink() if path in new_files else path.rmdir()
        raise


def locate_model(
    model: PathLike, *, verify: Verifier, check: Optional[ModelCheck] = None,
    cache: Optional[PathLike] = None, url: Optional[str] = None,
) -> Tuple[Path, Optional[Path]]:
    """(weights file, directory or archive; options.json or None) of a path or a model name.

    An existing file or directory wins over a name; a name is looked up in
    :data:`NAMED_MODELS` (and a published model downloaded if need be).
    """
    path = Path(model)
    if path.exists():
        return path, None
    if str(model) in NAMED_MODELS:
        files = model_files(str(model), verify=verify, check=check, cache=cache, url=url)
        return (files[0], None) if len(files) == 1 else (files[1], files[0])
    raise InputError(
        f"Weights file not found: {model} (no such file or directory, and not an ELMo model name: "
        f"{known_names()})"
    )


def known_names() -> str:
    """The model names, the ELMoForManyLangs ones as a pattern."""
    many = "elmoformanylangs-"
    names = [name for name in NAMED_MODELS if not name.startswith(many)]
    codes = [lang for lang, _, _ in ELMOFORMANYLANGS]
    return f"{', '.join(names)}, {many}LANG (LANG: {' '.join(codes)})"


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
