"""ELMo models by name: spacy-elmo's own biLMs and published ones, downloaded on first use into a cache directory.

``SPACY_ELMO_CACHE`` (default ``$XDG_CACHE_HOME/spacy-elmo``, else ``~/.cache/spacy-elmo``) and ``SPACY_ELMO_BASE_URL``
(default: each publisher's own; a mirror keeps their paths) change where published models are kept and fetched from.
"""
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple, Union

from .download import DownloadFailed, Verifier, download, redact
from .errors import InputError
from .model_packages import ModelPart, part_files

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
    # The folder in the cache (spacy-elmo's own: where files placed by hand are looked for).
    folder: str
    # Published: each file's path under `publisher_url` (options and weights, or one archive).
    files: Tuple[str, ...] = ()
    publisher_url: str = ALLENNLP_URL
    # Published in one of spacy-elmo's named sizes (NAMED_SIZES): files of another size are refused.
    size: Optional[str] = None
    # spacy-elmo's own: its biLM (options.json, weights.hdf5), and its softmax.hdf5 and vocab.txt.
    bilm: Optional[ModelPart] = None
    language_model: Optional[ModelPart] = None
    # Shipped static vectors trained on the model's text: a spaCy vectors directory
    # (`spacy init vectors --mode floret`) in the model's folder, under this name.
    vectors_folder: Optional[str] = None

    @property
    def shipped(self) -> bool:
        """spacy-elmo's own (in packages built from this repository), not a published model."""
        return self.bilm is not None

    def file_names(self) -> Tuple[str, ...]:
        """The files' names, as the publisher names them (and the cache keeps them)."""
        if self.bilm is not None:
            return self.bilm.file_names()
        return tuple(Path(path).name for path in self.files)


def _allennlp(name: str, folder: str, size: str, description: str) -> NamedModel:
    files = (f"{folder}/elmo_{folder}_options.json", f"{folder}/elmo_{folder}_weights.hdf5")
    return NamedModel(name=name, lang="en", description=description, folder=folder, files=files, size=size)


def _contributed(
    name: str, lang: str, options: str, weights: str, description: str, url: str = ALLENNLP_URL,
    size: Optional[str] = None,
) -> NamedModel:
    return NamedModel(
        name=name, lang=lang, description=description, folder=name, files=(options, weights), publisher_url=url,
        size=size,
    )


def _bilm(module: str, folder: str, options: str, weights: str, project: Optional[str] = None) -> ModelPart:
    return ModelPart(module, folder, (("options.json", options), ("weights.hdf5", weights)), project)


def _language_model(project: str, softmax: str, vocab: str) -> ModelPart:
    module = "spacy_elmo_" + project.replace("-", "_")
    return ModelPart(module, "", (("softmax.hdf5", softmax), ("vocab.txt", vocab)), project)


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


# The options.json of both compact models (the same sizes).
_COMPACT_OPTIONS = "f90740b68d6b34d7b68508e991ac768a5821476243f7e7aff1f880191e4baebb"

NAMED_MODELS: Dict[str, NamedModel] = {
    model.name: model
    for model in (
        NamedModel(
            name="english-compact", lang="en", folder="english_compact", vectors_folder="vectors",
            description="spacy-elmo's English biLM (LSTM 2x512, projection 128; Wikipedia, "
            "Stack Exchange, Gutenberg), in the spacy-elmo package",
            bilm=_bilm(
                "spacy_elmo", "resources/english_compact", _COMPACT_OPTIONS,
                "c4b9711edfada0ef03eb658ae34cefaf53a5460dcc5a06c01f569ae3ffc542a5",
            ),
            language_model=_language_model(
                "english-compact-lm", "e7f1c35a37333b2a12ef38713a15d4501c3856d8077f4e92c4ced176eb17f8f5",
                "42ebcf3a0c294c2805513cdc85399958873cbe248dd50f7ef0b0a5d0f899bee4",
            ),
        ),
        NamedModel(
            name="portuguese-compact", lang="pt", folder="portuguese_compact",
            description="spacy-elmo's Portuguese biLM (LSTM 2x512, projection 128; literature, laws, "
            "UD text, in UD Portuguese-Bosque's words), package spacy-elmo-portuguese-compact",
            bilm=_bilm(
                "spacy_elmo_portuguese_compact", "", _COMPACT_OPTIONS,
                "ad2d17282654815871ab79b4f928d97ce22651d92c6448e7f3799a057bfba04c", project="portuguese-compact",
            ),
            language_model=_language_model(
                "portuguese-compact-lm", "5a7e5c808c5197f0d24da6b2f321f890c9a3062d072c5c6b4cd02590a0c50178",
                "8568a965fb328562d77af359157c6496a3be5cab4906a02fe11fbec012d94d69",
            ),
        ),
        _allennlp("small", "2x1024_128_2048cnn_1xhighway", "small", "AllenNLP small (13.6M parameters, 1B Word)"),
        _allennlp("medium", "2x2048_256_2048cnn_1xhighway", "medium", "AllenNLP medium (28.0M parameters, 1B Word)"),
        _allennlp(
            "original", "2x4096_512_2048cnn_2xhighway", "original", "AllenNLP original (93.6M parameters, 1B Word)"
        ),
        _allennlp(
            "original-5.5b", "2x4096_512_2048cnn_2xhighway_5.5B", "original",
            "AllenNLP original trained on 5.5B tokens (Wikipedia, WMT news)",
        ),
        _contributed(
            "pubmed", "en", "contributed/pubmed/elmo_2x4096_512_2048cnn_2xhighway_options.json",
            "contributed/pubmed/elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5",
            "AllenNLP's original size trained on PubMed (biomedical English)", size="original",
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
    folder = cache_dir(cache) / model.folder
    if model.bilm is not None:
        return tuple(part_files(name, [model.bilm], folder))
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
    except BaseException as err:
        # A model arrives whole or not at all: nothing of a failed first download stays in the cache.
        for path in [*new_files, *new_folders]:  # files, then folders deepest first
            with contextlib.suppress(OSError):
                path.unlink() if path in new_files else path.rmdir()
        if isinstance(err, DownloadFailed):
            raise InputError(f"{err}. {_offline_hint(model, remote, targets, new_files)}") from None
        raise


def _offline_hint(model: NamedModel, remote: str, targets: List[Path], wanted: List[Path]) -> str:
    """Every file of `model` the cache lacks: its URL, and where to put it by hand."""
    urls = [redact(file_url(remote, path)) for path, target in zip(model.files, targets) if target in wanted]
    as_is = " (the .zip itself: spacy-elmo unpacks it there)" if targets[0].suffix == ".zip" else ""
    return (
        f"Without internet access, fetch {' and '.join(urls)} on another machine and put "
        f"{'it' if len(urls) == 1 else 'them'} in {targets[0].parent}{as_is}; the cache folder and the base URL "
        "are set by the loader's cache_dir and base_url, or SPACY_ELMO_CACHE and SPACY_ELMO_BASE_URL"
    )


def language_model_folder(model: PathLike, *, cache: Optional[PathLike] = None) -> Optional[Path]:
    """The folder of the softmax.hdf5 and vocab.txt of one of spacy-elmo's own models (what
    continuing its language model and its perplexity read), or None for a path or a
    published model (published without them). Its biLM is looked for too, so that one
    error names every file missing."""
    named = None if Path(model).exists() else NAMED_MODELS.get(str(model))
    if named is None or named.bilm is None or named.language_model is None:
        return None
    files = part_files(named.name, [named.bilm, named.language_model], cache_dir(cache) / named.folder)
    return files[-1].parent


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
