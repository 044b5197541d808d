"""Training checkpoints: one file, written atomically, loaded with clear errors; the
state of every process (data position, random state, running sums) goes in it.
Whether a run may continue from one: resume.py.
"""
import pickle
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import torch

from ..errors import CheckpointError, ConfigError, one_line
from ..models.pytorch.state_dicts import check_tensor, check_uncompressed
from ..output_files import atomic_output_path
from .config import ModelConfig, PretrainConfig, resolve_model
from .batch_worker import PreparedBatches
from .progress import Progress
from .run_directory import RunDirectory
from .trainer import Trainer
from .vocab import Vocabulary

CHECKPOINT_FORMAT = "spacy-elmo.pretrain-checkpoint.v1"
_REQUIRED = ("format", "step", "model", "optimizer", "processes", "config", "vocab")


def save_checkpoint(state: Dict[str, Any], path: Union[str, Path]) -> None:
    """Write `state` to a temporary file and rename it over `path`.

    A run killed while saving keeps its previous checkpoint.
    """
    with atomic_output_path(path, size=_tensor_bytes(state) + (1 << 20), what="Checkpoint") as tmp:
        try:
            torch.save({"format": CHECKPOINT_FORMAT, **state}, tmp)
        except RuntimeError as err:  # torch's zip writer reports a failed write so
            raise CheckpointError(f"Could not write {path} ({one_line(err, 200)}); the previous checkpoint is kept") from None


def _tensor_bytes(obj: Any) -> int:
    return sum(tensor.numel() * tensor.element_size() for _, tensor in _tensors(obj))


def _tensors(obj: Any) -> Iterator[Tuple[str, torch.Tensor]]:
    """Every tensor in a nest of dicts, lists and tuples, with its place (``model/bilm.lstm...``):
    a loop that visits each container once, as a damaged file may nest deep or in a cycle."""
    pending: List[Tuple[Any, Any]] = [((), obj)]
    seen = set()
    while pending:
        place, value = pending.pop()  # place: (parent's place, key), built into a name only for a tensor
        if isinstance(value, torch.Tensor):
            keys = []
            while place:
                place, key = place
                keys.append(str(key))
            yield "/".join(reversed(keys)), value
        elif isinstance(value, (dict, list, tuple)) and id(value) not in seen:
            seen.add(id(value))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            pending.extend(((place, key), child) for key, child in items)


def load_checkpoint(path: Union[str, Path]) -> Dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (tensors land on the CPU)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"No checkpoint at {path} (nothing to resume)")
    check_uncompressed(path, str(path), error=CheckpointError)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as err:
        raise CheckpointError(f"{path}: corrupt or unreadable checkpoint ({one_line(err, 200)})") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not a spacy-elmo pretraining checkpoint")
    missing = [key for key in _REQUIRED if key not in state]
    if missing:
        raise CheckpointError(f"{path}: incomplete checkpoint (missing {', '.join(missing)})")
    for name, tensor in _tensors(state):
        check_tensor(name, tensor, str(path))
    step = state["step"]
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f"{path}: damaged checkpoint (its step is {step!r}, not a count of steps)")
    return state


def save_training_state(
    path: Union[str, Path], *, trainer: Trainer, batches: PreparedBatches, progress: Progress,
    config: PretrainConfig, vocab: Vocabulary, origin: Dict[str, Any],
) -> None:
    """Gather every process's data position, random state and running sums to the
    main process, which writes them with the model, optimizer, config and `origin`
    (:func:`run_origin`) to `path`."""
    local = {
        "stream": batches.state_dict(),
        "sampler": trainer.sampler.state_dict() if trainer.sampler is not None else None,
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state(trainer.device) if trainer.device.type == "cuda" else None,
        "progress": progress.local_state(),
    }
    states = trainer.processes.gather_to_main(local)
    if trainer.processes.is_main:
        save_checkpoint(
            {
                "step": progress.step,
                "model": trainer.model.state_dict(),
                "optimizer": trainer.optimizer.state_dict(),
                "options": trainer.model.bilm.options.to_dict(),
                "processes": states,
                "shared": progress.shared_state(),
                "config": config.to_str(),
                "sections": config.model_sections(),
                "vocab": vocab.fingerprint(),
                "origin": origin,
            },
            path,
        )


def saved_sections(checkpoint: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The settings the checkpoint's run was trained with (:meth:`PretrainConfig.model_sections`).
    Earlier checkpoints hold ``[model]`` as written (a size name and its overrides): it is
    resolved the same way; one that cannot be resolved is returned as it is."""
    saved = checkpoint.get("sections")
    if not saved or "size" not in saved.get("model", {}):
        return saved
    try:
        return {**saved, "model": resolve_model(ModelConfig(**saved["model"])).to_dict()}
    except (KeyError, TypeError, ConfigError):
        return saved


def restore_training_state(
    checkpoint: Dict[str, Any], path: Union[str, Path], *, trainer: Trainer, batches: PreparedBatches,
    progress: Progress,
) -> None:
    """Put this process's part of `checkpoint` (read from `path`) back in place: the
    optimizer, data position, random state and running sums (the model's weights go
    in when it is assembled)."""
    try:
        trainer.optimizer.load_state_dict(checkpoint["optimizer"])
        local = checkpoint["processes"][trainer.processes.rank]
        batches.load_state_dict(local["stream"])
        if trainer.sampler is not None:
            trainer.sampler.load_state_dict(local["sampler"])
        torch.set_rng_state(local["torch_rng"])
        if trainer.device.type == "cuda" and local["cuda_rng"] is not None:
            torch.cuda.set_rng_state(local["cuda_rng"], trainer.device)
        progress.load(checkpoint["step"], checkpoint["shared"], local["progress"])
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{path}: cannot restore the training state ({err!r})") from None


def check_vocabulary(checkpoint: Dict[str, Any], directory: RunDirectory, vocab: Vocabulary) -> None:
    if vocab.fingerprint() != checkpoint["vocab"]:
        raise CheckpointError(f"{directory.vocab} is not the vocabulary of {directory.checkpoint}")


