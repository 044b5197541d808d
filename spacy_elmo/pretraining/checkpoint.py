"""Training checkpoints: one file, written atomically, loaded with clear errors."""
import pickle
import zipfile
from pathlib import Path
from typing import Any, Dict, Union

import torch

from ..util import atomic_output_path
from .errors import CheckpointError

CHECKPOINT_NAME = "checkpoint.pt"
CHECKPOINT_FORMAT = "spacy-elmo.pretrain-checkpoint.v1"
_REQUIRED = ("format", "step", "model", "optimizer", "processes", "config", "vocab")


def save_checkpoint(state: Dict[str, Any], path: Union[str, Path]) -> None:
    """Write `state` to a temporary file and rename it over `path`.

    A run killed while saving keeps its previous checkpoint.
    """
    with atomic_output_path(path) as tmp:
        torch.save({"format": CHECKPOINT_FORMAT, **state}, tmp)


def load_checkpoint(path: Union[str, Path]) -> Dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (tensors land on the CPU)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"No checkpoint at {path} (nothing to resume)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as err:
        reason = " ".join(str(err).split())[:200]
        raise CheckpointError(f"{path}: corrupt or unreadable checkpoint ({reason})") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not a spacy-elmo pretraining checkpoint")
    missing = [key for key in _REQUIRED if key not in state]
    if missing:
        raise CheckpointError(f"{path}: incomplete checkpoint (missing {', '.join(missing)})")
    return state
