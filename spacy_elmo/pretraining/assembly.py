"""The language model a run trains or evaluates, assembled in one place: a biLM, new
or read from an original-format model, with one softmax, new or read from a run."""
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple

from ..errors import ConfigError
from ..models.pytorch.bilm import ElmoBiLM
from ..models.pytorch.options import BiLMOptions
from ..models.pytorch.original_format import load_bilm, read_options, resolve_paths
from ..models.pytorch.state_dicts import check_state_dict
from .config import SoftmaxConfig
from .language_model import BiLMLanguageModel
from .softmax import LMSoftmax, load_softmax

#: An original-format biLM: its weights file or directory, and its ``options.json`` (None: beside them).
PretrainedBiLM = Tuple[Path, Optional[Path]]


def assemble_model(
    vocab_size: int, *, dropout: float = 0.0, options: Optional[BiLMOptions] = None,
    pretrained: Optional[PretrainedBiLM] = None, softmax: Optional[Path] = None,
    state: Optional[Mapping[str, Any]] = None,
) -> BiLMLanguageModel:
    """The biLM and a softmax over `vocab_size` words as one model.

    Either `options` (a new, random biLM: seed torch first for the same weights) or `pretrained` (an original-format
    biLM). `dropout`: between and after the LSTM layers; `softmax`: the ``softmax.hdf5`` to start from (None: a new
    one); `state`: a checkpoint's weights, loaded last."""
    if (options is None) == (pretrained is None):
        raise ValueError("assemble_model takes the options of a new biLM or a pretrained one, not both")
    bilm = ElmoBiLM(options) if options is not None else load_bilm(*pretrained)
    dim = bilm.options.projection_dim
    head = load_softmax(softmax, vocab_size=vocab_size, dim=dim) if softmax is not None else LMSoftmax(vocab_size, dim)
    bilm.lstm.set_dropout(dropout)
    model = BiLMLanguageModel(bilm, head, output_dropout=dropout)
    if state is not None:
        shapes = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
        check_state_dict(state, shapes, "The checkpoint's weights")
        model.load_state_dict(state)
    return model


#: The ``[model]`` sizes a run may set with `--init-from`, and what they count.
SIZE_UNITS = {"lstm_dim": "LSTM cells per layer and direction", "projection_dim": "projection dimensions"}


def check_same_sizes(pretrained: PretrainedBiLM, **sizes: Optional[int]) -> None:
    """A ConfigError for a ``[model]`` size in `sizes` (``lstm_dim``, ``projection_dim``) set
    to another value than the pretrained biLM's own: `--init-from` continues it as it is."""
    own = read_options(resolve_paths(*pretrained)[1])
    for name, wanted in sizes.items():
        current = getattr(own, name)
        if wanted is not None and wanted != current:
            raise ConfigError(
                f"model.{name} is {wanted}, but {pretrained[0]} has {current} {SIZE_UNITS[name]}: --init-from "
                f"continues a biLM at its own sizes (model.{name} = null keeps them)"
            )


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
