"""Whether a run continues: ``--resume`` (True, or "auto") as the command line gives it,
what a run started from besides its config (its origin), and the checks that the run in
an output directory can go on under this config and origin, or, for "auto", is another
run (moved aside, never deleted, by :class:`~.run.PretrainRun`).
"""
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from confection import Config

from ..errors import CheckpointError, ConfigError
from .checkpoint import saved_sections
from .config import PretrainConfig
from .run_directory import RunDirectory
from .tokenized_files import file_identity

#: ``resume=AUTO``: continue the run in the output directory when it is this run (same
#: settings, ``--init-from`` and corpus files); move another run aside and start afresh.
AUTO = "auto"
Resume = Union[bool, str]


def check_resume(resume: Any) -> Resume:
    if resume not in (True, False, AUTO):
        raise ConfigError(f"resume must be true, false or {AUTO!r}, got {resume!r}")
    return resume


def resume_mode(resume: bool, args: List[str]) -> Tuple[Union[bool, str], List[str]]:
    """``--resume``'s mode (False, True or "auto") and the config overrides in `args`.

    Typer has no options with an optional value, so ``--resume`` is a flag, and the
    ``auto`` of ``--resume auto`` lands among the overrides, where a ``--section.key``
    would stand (a value after ``--section.key`` is that setting's).
    """
    mode: Union[bool, str] = resume
    rest: List[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if mode is True and arg == AUTO:
            mode, index = AUTO, index + 1
            continue
        takes_value = arg.startswith("--") and "=" not in arg and index + 1 < len(args) and not args[index + 1].startswith("--")
        step = 2 if takes_value else 1
        rest.extend(args[index : index + step])
        index += step
    return mode, rest


def run_origin(
    init_from: Optional[str], train_files: Sequence[Path], dev_files: Sequence[Path] = ()
) -> Dict[str, Any]:
    """What a run started from besides its config: ``--init-from`` (as given) and its
    corpus files, training then held-out, as they are now (:func:`file_identity`)."""
    return {
        "init_from": init_from, "corpus_files": [file_identity(path) for path in [*train_files, *dev_files]],
        "n_train_files": len(train_files),
    }


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
