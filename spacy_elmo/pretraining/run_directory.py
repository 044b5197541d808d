"""A pretraining run's output directory: the name of each file in it, and how they are written and read back.

The export (biLM, softmax and vocabulary) is listed last in ``export.json``; the user's own files there are left alone.
"""
import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, Optional, Set, Union

from ..errors import InputError, one_line
from ..input_files import file_sha256
from ..models.pytorch.original_format import OPTIONS_NAME, WEIGHTS_NAME, save_bilm
from ..output_files import REGULAR_FILE, atomic_output_path, file_kind, remove_stale_temp_files
from .config import PretrainConfig, load_config
from .language_model import BiLMLanguageModel
from .metrics import MetricsLog
from .softmax import save_softmax
from .vocab import Vocabulary

CHECKPOINT_NAME = "checkpoint.pt"
CONFIG_NAME = "config.cfg"
EXPORT_NAME = "export.json"  # the exported files' step and SHA-256 digests, written after them
METRICS_NAME = "metrics.jsonl"
PLOT_NAME = "perplexity.png"
SOFTMAX_NAME = "softmax.hdf5"
STATS_NAME = "corpus_stats.json"
VOCAB_NAME = "vocab.txt"
TOKENIZED_NAME = "tokenized"  # the tokenized files: the training text, tokenized once
EXPORTED = (OPTIONS_NAME, WEIGHTS_NAME, SOFTMAX_NAME, VOCAB_NAME)
RUN_OUTPUTS = (
    CONFIG_NAME, STATS_NAME, VOCAB_NAME, SOFTMAX_NAME, CHECKPOINT_NAME, METRICS_NAME, PLOT_NAME,
    WEIGHTS_NAME, OPTIONS_NAME, EXPORT_NAME,
)
#: A run moved aside by ``--resume auto`` becomes ``OUT.previous`` (``.previous.2``, ... when taken).
PREVIOUS_SUFFIX = ".previous"


class RunDirectory:
    """The files of the pretraining run in `path` (which need not exist yet)."""

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = Path(path)
        self.checkpoint = self.path / CHECKPOINT_NAME
        self.config = self.path / CONFIG_NAME
        self.manifest = self.path / EXPORT_NAME
        self.metrics = MetricsLog(self.path / METRICS_NAME)
        self.plot = self.path / PLOT_NAME
        self.softmax = self.path / SOFTMAX_NAME
        self.stats = self.path / STATS_NAME
        self.vocab = self.path / VOCAB_NAME
        self.tokenized = self.path / TOKENIZED_NAME

    def check_finished(self, *, config: bool = True) -> None:
        """Raise :class:`InputError` unless the directory holds a model to evaluate, whole (and its `config`)."""
        needed = (self.config, self.vocab, self.softmax) if config else (self.vocab, self.softmax)
        missing = [path.name for path in needed if not path.is_file()]
        if missing:
            raise InputError(f"{self.path} is not a finished pretraining run: no {', '.join(missing)}")
        self.check_export()

    def check_export(self) -> None:
        """Raise :class:`InputError` when the exported files are not those of one export
        (a run stopped while exporting). A run exported before ``export.json`` has none: its files pass."""
        if file_kind(self.manifest) is not None and self.exported_step() is None:
            raise InputError(
                f"{self.path}: the exported biLM is not whole (its files are not those {EXPORT_NAME} lists: the run "
                f"was stopped while exporting); pretrain --resume on it exports its last checkpoint again"
            )

    def exported_step(self) -> Optional[int]:
        """The step of the export in the directory, or None when it is not whole or not listed."""
        try:
            manifest = json.loads(self.manifest.read_bytes()) if self.manifest.is_file() else None
            whole = isinstance(manifest, dict) and manifest.get("sha256") == self._digests()
        except (OSError, ValueError, RecursionError):
            return None
        step = manifest.get("step") if whole else None
        return step if isinstance(step, int) else None

    def read_config(self) -> PretrainConfig:
        return load_config(self.config, {})

    def read_vocab(self) -> Vocabulary:
        return Vocabulary.from_disk(self.vocab)

    def read_stats(self) -> Optional[Dict[str, Any]]:
        """The corpus statistics, or None when the corpus was not counted."""
        kind = file_kind(self.stats)
        if kind is None:
            return None
        try:
            if kind != REGULAR_FILE:
                raise ValueError(f"it is {kind}")
            stats = json.loads(self.stats.read_bytes())
            if not _corpus_stats(stats):
                raise ValueError("not the statistics of a corpus")
        except (OSError, ValueError, RecursionError) as err:
            raise InputError(
                f"{self.stats}: damaged corpus statistics ({one_line(err, 100)}); delete it to resume without them"
            ) from None
        return stats

    def write_config(self, config: PretrainConfig) -> None:
        with atomic_output_path(self.config) as tmp:
            tmp.write_text(config.to_str(), encoding="utf8")

    def write_stats(self, stats: Dict[str, Any]) -> None:
        with atomic_output_path(self.stats) as tmp:
            tmp.write_text(json.dumps(stats, indent=2) + "\n", encoding="utf8")

    def export(self, model: BiLMLanguageModel, vocab: Vocabulary, step: int) -> None:
        """Write the original-format biLM (options.json, weights.hdf5), softmax and vocabulary
        of `step`, then export.json, which lists them: a run stopped before it leaves an
        export that :meth:`exported_step` tells from a whole one."""
        save_bilm(model.bilm, self.path)
        save_softmax(model.softmax, self.softmax)
        vocab.to_disk(self.vocab)
        with atomic_output_path(self.manifest) as tmp:
            tmp.write_text(json.dumps({"step": step, "sha256": self._digests()}, indent=2) + "\n", encoding="utf8")

    def _digests(self) -> Dict[str, Optional[str]]:
        """Each exported file's SHA-256 (None: not a regular file)."""
        return {
            name: file_sha256(self.path / name) if (self.path / name).is_file() else None for name in EXPORTED
        }

    def remove_stale_temp_files(self) -> None:
        """Remove what a run killed while saving left: in the directory only temporary
        files of the run's own outputs (the others are the user's); in the tokenized files all."""
        remove_stale_temp_files(self.path, RUN_OUTPUTS)
        remove_stale_temp_files(self.tokenized, None)

    def entries(self) -> Set[str]:
        return set(os.listdir(self.path))

    def remove_entries_since(self, before: Set[str]) -> None:
        """Remove what was added to the directory since :meth:`entries` gave `before`."""
        for name in self.entries() - before:
            path = self.path / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def move_aside(self) -> Path:
        """Rename the directory to the first free ``NAME.previous``, ``NAME.previous.2``, ...
        (nothing is deleted); returns the new path."""
        base = self.path.with_name(self.path.name + PREVIOUS_SUFFIX)
        target, n = base, 1
        while target.exists():
            n += 1
            target = base.with_name(f"{base.name}.{n}")
        self.path.rename(target)
        return target


def _corpus_stats(stats: Any) -> bool:
    """Whether `stats` holds what a resumed run reads of them: a count of tokens, and a number as
    the unigram baseline, if any."""
    return (
        isinstance(stats, dict) and type(stats.get("n_tokens")) is int and stats["n_tokens"] >= 0
        and type(stats.get("dev_unigram_perplexity", 0.0)) in (int, float)
    )
