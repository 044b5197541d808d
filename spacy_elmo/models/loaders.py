"""Weights loaders: where the elmo component gets its biLM at initialize.

No spaCy or Thinc here: pretraining finds its `--init-from` model through this module
on machines without them (a GPU machine with PyTorch and the pure-Python dependencies).
"""
from functools import partial
from pathlib import Path
from typing import Callable, Optional, Tuple, Union

from ..errors import InputError, SpacyElmoError
from ..named_models import NAMED_MODELS, default_model, is_downloaded, locate_model
from .pytorch import original_format
from .pytorch.bilm import ElmoBiLM
from .pytorch.downloaded_files import verify_download
from .pytorch.formats import archive_of, load_model
from .pytorch.options import NAMED_SIZES, BiLMOptions

#: Returns a ready biLM (size and weights from its files).
WeightsLoaderT = Callable[[], ElmoBiLM]


def build_original_weights_loader_v1(
    *, path: Optional[Path], options: Optional[Path] = None
) -> WeightsLoaderT:
    """Load a biLM in the bilm-tf/AllenNLP format (also what
    ``python -m spacy_elmo pretrain`` writes).

    path (Path): a directory with ``options.json`` and ``weights.hdf5``, or an
        ``.hdf5`` file with ``options.json`` beside it.
    options (Optional[Path]): the ``options.json``, when it is elsewhere.
    """
    return partial(load_original_weights, path, options)


def load_original_weights(path: Optional[Path], options: Optional[Path] = None) -> ElmoBiLM:
    if path is None:
        raise InputError(
            "No ELMo weights given: set paths.elmo_model (a directory with options.json and "
            "weights.hdf5, or an .hdf5 file with options.json beside it)"
        )
    return original_format.load_bilm(path, options).eval()


def build_elmo_weights_loader_v1(
    *, model: Optional[Union[str, Path]] = None, lang: str = "en",
    cache_dir: Optional[Path] = None, base_url: Optional[str] = None,
) -> WeightsLoaderT:
    """Load a biLM by name or path; with none given, the one spacy-elmo ships for `lang`.

    model (Optional[str]): a model name ("english-compact", shipped in the package;
        "small", "medium", "original", "original-5.5b", AllenNLP's, downloaded once
        into the cache), a directory with ``options.json`` and ``weights.hdf5``, or an
        ``.hdf5`` file with ``options.json`` beside it. Null: the default for `lang`.
    lang (str): the pipeline's language (``${nlp.lang}``), for the default.
    cache_dir (Optional[Path]): where downloaded models are kept (default:
        ``SPACY_ELMO_CACHE``, else ``$XDG_CACHE_HOME/spacy-elmo``, else
        ``~/.cache/spacy-elmo``).
    base_url (Optional[str]): where they are downloaded from (default:
        ``SPACY_ELMO_BASE_URL`` or AllenNLP's public bucket).
    """
    return partial(load_named_weights, model, lang=lang, cache_dir=cache_dir, base_url=base_url)


def load_named_weights(
    model: Optional[Union[str, Path]], *, lang: str = "en",
    cache_dir: Optional[Path] = None, base_url: Optional[str] = None,
) -> ElmoBiLM:
    return load_bilm(model or default_model(lang), cache_dir=cache_dir, base_url=base_url).eval()


def load_bilm(
    model: Union[str, Path], options: Optional[Union[str, Path]] = None, *,
    cache_dir: Optional[Path] = None, base_url: Optional[str] = None,
) -> ElmoBiLM:
    """A biLM by name or path, as the elmo component, `embed`, `perplexity` and
    `pretrain --init-from` find it (:func:`find_model`): a model name, a directory with
    ``options.json`` and the weights, a weights file (``options.json`` beside it, or
    `options`), or an ELMoForManyLangs folder."""
    weights, named_options = find_model(model, cache=cache_dir, url=base_url)
    try:
        return load_model(weights, Path(options) if options is not None else named_options)
    except SpacyElmoError as err:
        if not is_downloaded(model):
            raise
        # A damaged file in the download cache would fail the same way on every run.
        raise type(err)(
            f"{err} -- it is a downloaded copy of {str(model)!r}: delete {weights.parent} to download it again"
        ) from None


def find_model(
    model: Union[str, Path], *, cache: Optional[Path] = None, url: Optional[str] = None
) -> Tuple[Path, Optional[Path]]:
    """(weights file or directory, options.json or None) of a path or a model name, a
    published model downloaded and verified first if it is not in the cache (an archive
    unpacked there); a first download is kept only once the model loads."""
    check = partial(_check_loads, str(model))
    weights, options = locate_model(model, verify=verify_download, check=check, cache=cache, url=url)
    if options is not None:
        _check_size(str(model), options)
    archive = archive_of(weights)
    if archive is not None:
        if not is_downloaded(model):
            raise InputError(f"{weights} is a {archive.SUFFIX[1:]} archive: {archive.LOCAL_HINT}")
        return archive.unpack_archive(weights), None
    return weights, options


def _check_loads(name: str, files: Tuple[Path, ...]) -> None:
    """Load a newly downloaded model once (an archive: unpack it, which loads it), so a
    model that does not load, or is not `name`, never stays in the cache."""
    archive = archive_of(files[0])
    if archive is not None:
        archive.unpack_archive(files[0])
    else:
        _check_size(name, files[0])
        original_format.load_bilm(files[1], files[0])


def _check_size(name: str, options: Path) -> None:
    """Refuse the files of a published model of a known size whose options declare
    another (no checksums are published: another model's files must not pass as `name`)."""
    size = NAMED_MODELS[name].size if is_downloaded(name) else None
    if size is None:
        return
    found, expected = _sizes(original_format.read_options(options)), _sizes(NAMED_SIZES[size])
    if found != expected:
        raise InputError(
            f"{options}: the options of a biLM of {found}, not {name}'s ({expected}): another model's files are "
            f"in {options.parent}; delete them to download {name} again, or put its own files there"
        )


def _sizes(options: BiLMOptions) -> str:
    return (
        f"LSTM {options.n_layers}x{options.lstm_dim}, projection {options.projection_dim}, filters "
        f"{[list(f) for f in options.filters]}, {options.n_highway} highway, characters {options.char_embedding_dim}"
    )

