"""Training checkpoints: one file, written atomically, loaded with clear errors; the
state of every process (data position, random state, running sums) goes in it.
Before a run continues from one, the checks here say whether it can.
"""
import pickle
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from confection import Config

from ..errors import CheckpointError, ConfigError, one_line
from ..output_files import atomic_output_path
from .config import ModelConfig, PretrainConfig, resolve_model
from .batch_stream import BatchStream
from .progress import Progress
from .run_directory import RunDirectory
from .tokenized_files import file_identity
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
    """The bytes of every tensor in a nest of dicts, lists and tuples."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(value) for value in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(value) for value in obj)
    return 0


def load_checkpoint(path: Union[str, Path]) -> Dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (tensors land on the CPU)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"No checkpoint at {path} (nothing to resume)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as err:
        raise CheckpointError(f"{path}: corrupt or unreadable checkpoint ({one_line(err, 200)})") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not a spacy-elmo pretraining checkpoint")
    missing = [key for key in _REQUIRED if key not in state]
    if missing:
        raise CheckpointError(f"{path}: incomplete checkpoint (missing {', '.join(missing)})")
    step = state["step"]
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f"{path}: damaged checkpoint (its step is {step!r}, not a count of steps)")
    return state


def run_origin(
    init_from: Optional[str], train_files: Sequence[Path], dev_files: Sequence[Path] = ()
) -> Dict[str, Any]:
    """What a run started from besides its config: ``--init-from`` (as given) and its
    corpus files, training then held-out, as they are now (:func:`file_identity`)."""
    return {
        "init_from": init_from, "corpus_files": [file_identity(path) for path in [*train_files, *dev_files]],
        "n_train_files": len(train_files),
    }


def save_training_state(
    path: Union[str, Path], *, trainer: Trainer, stream: BatchStream, progress: Progress,
    config: PretrainConfig, vocab: Vocabulary, origin: Dict[str, Any],
) -> None:
    """Gather every process's data position, random state and running sums to the
    main process, which writes them with the model, optimizer, config and `origin`
    (:func:`run_origin`) to `path`."""
    local = {
        "stream": stream.state_dict(),
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
    checkpoint: Dict[str, Any], path: Union[str, Path], *, trainer: Trainer, stream: BatchStream, progress: Progress
) -> None:
    """Put this process's part of `checkpoint` (read from `path`) back in place: the
    optimizer, data position, random state and running sums (the model's weights go
    in when it is assembled)."""
    try:
        trainer.optimizer.load_state_dict(checkpoint["optimizer"])
        local = checkpoint["processes"][trainer.processes.rank]
        stream.load_state_dict(local["stream"])
        if trainer.sampler is not None:
            trainer.sampler.load_state_dict(local["sampler"])
        torch.set_rng_state(local["torch_rng"])
        if trainer.device.type == "cuda" and local["cuda_rng"] is not None:
            torch.cuda.set_rng_state(local["cuda_rng"], trainer.device)
        progress.load(checkpoint["step"], checkpoint["shared"], local["progress"])
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{path}: cannot restore the training state ({err!r})") from None


def check_resumable(
    checkpoint: Dict[str, Any], directory: RunDirectory, *, config: PretrainConfig, origin: Dict[str, Any],
    world_size: int,
) -> None:
    """Raise unless the run in `directory`, whose `checkpoint` this is, can go on under
    `config` and `origin` (:func:`run_origin`): the same model, softmax and vocabulary
    settings, the same training files, unchanged (its read position is saved), and as
    many processes."""
    saved, current = saved_sections(checkpoint), config.model_sections()
    if saved != current:
        changed = sorted(name for name, value in current.items() if (saved or {}).get(name) != value)
        raise ConfigError(
            f"--resume: the config's [{'], ['.join(changed)}] differ from the run in "
            f"{directory.path}; resume with the same model, vocab and softmax settings"
        )
    changes = changed_files(*_training_files(checkpoint.get("origin"), origin))
    if changes:
        raise ConfigError(
            f"--resume: the training files (corpus.train = {config.corpus.train}) are not those the run in "
            f"{directory.path} was trained on, compared by path, size and modification time: {changes}; resume "
            f"with the files as they were (the run's read position is saved), or start a new run elsewhere"
        )
    if len(checkpoint["processes"]) != world_size:
        raise CheckpointError(
            f"{directory.checkpoint} was written by {len(checkpoint['processes'])} process(es); "
            f"resume it with the same number (got {world_size})"
        )


def _training_files(saved: Any, now: Dict[str, Any]) -> Tuple[List[List], List[List]]:
    """The training files of the `saved` origin and of `now` (:func:`run_origin`).

    An origin saved before ``n_train_files`` does not tell them from the held-out files
    after them: then both lists hold all corpus files. One saved before ``corpus_files``
    lists none: then neither does (nothing to compare).
    """
    saved = saved if isinstance(saved, dict) else {}
    if "corpus_files" not in saved:
        return [], []
    before, after = saved["corpus_files"], now["corpus_files"]
    if "n_train_files" not in saved:
        return before, after
    return before[: saved["n_train_files"]], after[: now["n_train_files"]]


def changed_files(before: List[List], after: List[List], *, shown: int = 3) -> str:
    """What differs between two lists of :func:`file_identity` (empty: nothing), such as
    "data/b.txt deleted, data/c.txt new"; at most `shown` files are named."""
    old = {path: rest for path, *rest in before}
    new = {path: rest for path, *rest in after}
    changes = [f"{_relative(path)} deleted" for path in old if path not in new]
    changes += [f"{_relative(path)} new" for path in new if path not in old]
    changes += [f"{_relative(path)} changed" for path in new if path in old and old[path] != new[path]]
    if len(changes) > shown:
        changes[shown:] = [f"and {len(changes) - shown} more"]
    return ", ".join(changes)


def _relative(path: str) -> str:
    """`path` (resolved) relative to the working directory when it lies inside it."""
    try:
        return str(Path(path).relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def check_vocabulary(checkpoint: Dict[str, Any], directory: RunDirectory, vocab: Vocabulary) -> None:
    if vocab.fingerprint() != checkpoint["vocab"]:
        raise CheckpointError(f"{directory.vocab} is not the vocabulary of {directory.checkpoint}")


def check_steps_left(step: int, max_steps: int, directory: RunDirectory) -> None:
    if step > max_steps:
        raise ConfigError(
            f"--resume: the run in {directory.path} is at step {step}, past training.max_steps "
            f"({max_steps}); give a larger training.max_steps to train on"
        )


def another_run(checkpoint: Dict[str, Any], *, config: PretrainConfig, origin: Dict[str, Any]) -> Optional[str]:
    """Why `checkpoint` belongs to another run than the one `config` and `origin`
    (:func:`run_origin`) describe, or None when it is this run: the same settings, the
    same ``--init-from`` and the same corpus files, unchanged since."""
    try:
        saved = Config().from_str(checkpoint["config"], interpolate=False)
    except Exception:  # confection raises assorted parse errors
        return "its saved config cannot be read"
    current = Config().from_str(config.to_str(), interpolate=False)
    changed = sorted(name for name in set(saved) | set(current) if saved.get(name) != current.get(name))
    if changed:
        return f"it was trained with other settings in [{'], ['.join(changed)}]"
    saved_origin = checkpoint.get("origin")
    if not isinstance(saved_origin, dict):
        saved_origin = {}
    if saved_origin.get("init_from") != origin["init_from"]:
        return f"it started from {_start(saved_origin.get('init_from'))}, this run from {_start(origin['init_from'])}"
    if saved_origin.get("corpus_files") != origin["corpus_files"]:
        return "its corpus files are not as they were at its last checkpoint"
    return None


def _start(init_from: Optional[str]) -> str:
    return "new weights" if init_from is None else f"--init-from {init_from}"
