"""The language model a run trains or evaluates, assembled in one place: a biLM, new
or read from an original-format model, with one softmax, new or read from a run."""
import dataclasses
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple

from ..errors import one_line
from ..models.pytorch.bilm import ElmoBiLM
from ..models.pytorch.options import BiLMOptions
from ..models.pytorch.original_format import load_bilm, read_options, resolve_paths
from ..models.pytorch.widen import widen_lstm
from .config import SoftmaxConfig, check_size
from .errors import CheckpointError, ConfigError
from .objective import BiLMLanguageModel
from .softmax import LMSoftmax, load_softmax

#: An original-format biLM: its weights file or directory, and its ``options.json`` (None: beside them).
PretrainedBiLM = Tuple[Path, Optional[Path]]


def assemble_model(
    vocab_size: int, *, dropout: float = 0.0, options: Optional[BiLMOptions] = None,
    pretrained: Optional[PretrainedBiLM] = None, softmax: Optional[Path] = None,
    state: Optional[Mapping[str, Any]] = None, lstm_dim: Optional[int] = None,
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
    """
    if (options is None) == (pretrained is None):
        raise ValueError("assemble_model takes the options of a new biLM or a pretrained one, not both")
    if lstm_dim is not None and pretrained is None:
        raise ValueError("assemble_model widens a pretrained biLM only (a new one takes its sizes from options)")
    bilm = ElmoBiLM(options) if options is not None else load_bilm(*pretrained)
    if lstm_dim is not None and lstm_dim != bilm.options.lstm_dim:
        bilm = widen_lstm(bilm, lstm_dim)
    dim = bilm.options.projection_dim
    head = load_softmax(softmax, vocab_size=vocab_size, dim=dim) if softmax is not None else LMSoftmax(vocab_size, dim)
    bilm.set_dropout(dropout)
    model = BiLMLanguageModel(bilm, head, output_dropout=dropout)
    if state is not None:
        try:
            model.load_state_dict(state)
        except RuntimeError as err:
            raise CheckpointError(f"The checkpoint's weights do not fit its model ({one_line(err, 200)})") from None
    return model


def lstm_growth(pretrained: PretrainedBiLM, lstm_dim: Optional[int]) -> Optional[Tuple[int, int]]:
    """``(its cells, lstm_dim)`` when ``[model] lstm_dim`` widens the pretrained biLM's
    LSTM, None when it keeps its size; a ConfigError for an lstm_dim below its own or a
    widened biLM over the size limit."""
    if lstm_dim is None:
        return None
    own = read_options(resolve_paths(*pretrained)[1])
    if lstm_dim < own.lstm_dim:
        raise ConfigError(
            f"model.lstm_dim is {lstm_dim}, but {pretrained[0]} has {own.lstm_dim} LSTM cells: --init-from can "
            f"widen a biLM's LSTM, not narrow it (model.lstm_dim = null keeps its size)"
        )
    if lstm_dim == own.lstm_dim:
        return None
    check_size(dataclasses.replace(own, lstm_dim=lstm_dim), f"--init-from {pretrained[0]} with model.lstm_dim {lstm_dim}")
    return own.lstm_dim, lstm_dim


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
