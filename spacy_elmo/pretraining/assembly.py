"""The language model a run trains or evaluates, assembled in one place: a biLM, new
or read from an original-format model, with one softmax, new or read from a run."""
import dataclasses
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from ..errors import ConfigError
from ..models.pytorch.bilm import ElmoBiLM
from ..models.pytorch.options import BiLMOptions
from ..models.pytorch.original_format import load_bilm, read_options, resolve_paths
from ..models.pytorch.state_dicts import check_state_dict
from ..models.pytorch.widen import widen_lstm, widen_projection
from .config import SoftmaxConfig, check_size
from .language_model import BiLMLanguageModel
from .softmax import LMSoftmax, load_softmax

#: An original-format biLM: its weights file or directory, and its ``options.json`` (None: beside them).
PretrainedBiLM = Tuple[Path, Optional[Path]]


def assemble_model(
    vocab_size: int, *, dropout: float = 0.0, options: Optional[BiLMOptions] = None,
    pretrained: Optional[PretrainedBiLM] = None, softmax: Optional[Path] = None,
    state: Optional[Mapping[str, Any]] = None, lstm_dim: Optional[int] = None,
    projection_dim: Optional[int] = None,
) -> BiLMLanguageModel:
    """The biLM and a softmax over `vocab_size` words as one model.

    :param dropout: between and after the LSTM layers.
    :param options: the sizes of a new, randomly initialised biLM (seed torch first
        for the same weights every time) ...
    :param pretrained: ... or the original-format biLM to start from instead.
    :param softmax: the ``softmax.hdf5`` to start from (None: a new softmax).
    :param state: a checkpoint's weights, loaded last.
    :param lstm_dim: grow the pretrained biLM's LSTM to this many cells, computing
        what it computed (:func:`~..models.pytorch.widen.widen_lstm`).
    :param projection_dim: grow its projection, and the softmax read from `softmax`,
        to this many dimensions, likewise (:func:`~..models.pytorch.widen.widen_projection`).
    """
    if (options is None) == (pretrained is None):
        raise ValueError("assemble_model takes the options of a new biLM or a pretrained one, not both")
    if (lstm_dim is not None or projection_dim is not None) and pretrained is None:
        raise ValueError("assemble_model widens a pretrained biLM only (a new one takes its sizes from options)")
    bilm = ElmoBiLM(options) if options is not None else load_bilm(*pretrained)
    own_dim = bilm.options.projection_dim
    if lstm_dim is not None and lstm_dim != bilm.options.lstm_dim:
        bilm = widen_lstm(bilm, lstm_dim)
    if projection_dim is not None and projection_dim != own_dim:
        bilm = widen_projection(bilm, projection_dim)
    dim = bilm.options.projection_dim
    if softmax is not None:
        head = load_softmax(softmax, vocab_size=vocab_size, dim=own_dim).widened(dim)
    else:
        head = LMSoftmax(vocab_size, dim)
    bilm.set_dropout(dropout)
    model = BiLMLanguageModel(bilm, head, output_dropout=dropout)
    if state is not None:
        shapes = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
        check_state_dict(state, shapes, "The checkpoint's weights")
        model.load_state_dict(state)
    return model


#: The sizes `--init-from` can grow: what grows, what it counts, and what the new parts start as.
GROWABLE = {
    "lstm_dim": (
        "LSTM", "cells per layer and direction",
        "the new cells start with zero projection rows, so its outputs are unchanged",
    ),
    "projection_dim": (
        "projection", "dimensions",
        "the new dimensions start with zero output weights, so its outputs are unchanged, with zeros appended",
    ),
}


def growth(pretrained: PretrainedBiLM, **sizes: Optional[int]) -> Dict[str, Tuple[int, int]]:
    """``{size: (its value, the new value)}`` for each ``[model]`` size in `sizes`
    (``lstm_dim``, ``projection_dim``) that widens the pretrained biLM; empty when it
    keeps its sizes. A ConfigError for a size below its own or a widened biLM over the
    size limit."""
    own = read_options(resolve_paths(*pretrained)[1])
    grown: Dict[str, Tuple[int, int]] = {}
    for name, wanted in sizes.items():
        current = getattr(own, name)
        if wanted is None or wanted == current:
            continue
        if wanted < current:
            part, unit, _ = GROWABLE[name]
            raise ConfigError(
                f"model.{name} is {wanted}, but {pretrained[0]} has {current} {unit}: --init-from can widen a "
                f"biLM's {part}, not narrow it (model.{name} = null keeps its size)"
            )
        grown[name] = (current, wanted)
    if not grown:
        return grown
    wider = dataclasses.replace(own, **{name: new for name, (_, new) in grown.items()})
    if own.has_char_projection and not wider.has_char_projection:
        raise ConfigError(
            f"model.projection_dim is {wider.projection_dim}, the width of {pretrained[0]}'s character CNN: a biLM "
            f"of that width has no token projection, so widening to it would change what it computes (choose "
            f"another width)"
        )
    settings = " and ".join(f"model.{name} {new}" for name, (_, new) in grown.items())
    check_size(wider, f"--init-from {pretrained[0]} with {settings}")
    return grown


def negative_samples(softmax: SoftmaxConfig, vocab_size: int) -> Optional[int]:
    """Negatives per step of the sampled softmax, or None for the full softmax."""
    sampled = softmax.kind == "sampled" or (softmax.kind == "auto" and vocab_size > softmax.max_full_vocab)
    if not sampled:
        return None
    if softmax.n_negative_samples >= vocab_size:
        raise ConfigError(
            f"softmax.n_negative_samples ({softmax.n_negative_samples}) must be smaller than "
            f"the vocabulary ({vocab_size} words); use softmax.kind = \"full\" for small vocabularies"
        )
    return softmax.n_negative_samples
