"""Weights loaders: where the elmo component gets its biLM at initialize."""
from functools import partial
from pathlib import Path
from typing import Optional

from ..errors import InputError
from ..models.pytorch.original_format import load_bilm
from .pytorch.bilm import ElmoBiLM
from .types import WeightsLoaderT


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
    return load_bilm(path, options).eval()
