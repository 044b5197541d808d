"""A pretraining run's output directory: the name of each file in it, and how they are
written and read back.

It holds the original-format biLM (``options.json``, ``weights.hdf5``) with its softmax
and vocabulary, the resolved config, the corpus statistics, the metrics log and its
plot, the checkpoint and the tokenized files; the user's own files there are left alone.
"""
import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, Optional, Set, Union

from ..errors import InputError
from ..models.pytorch.original_format import OPTIONS_NAME, WEIGHTS_NAME, save_bilm
from ..output_files import atomic_output_path, remove_stale_temp_files
from .config import PretrainConfig, load_config
from .language_model import BiLMLanguageModel
from .metrics import MetricsLog
from .softmax import save_softmax
from .vocab import Vocabulary

CHECKPOINT_NAME = "checkpoint.pt"
CONFIG_NAME = "config.cfg"
METRICS_NAME = "metrics.jsonl"
PLOT_NAME = "perplexity.png"
SOFTMAX_NAME = "softmax.hdf5"
STATS_NAME = "corpus_stats.json"
VOCAB_NAME = "vocab.txt"
TOKENIZED_NAME = "tokenized"  # the tokenized files: the training text, tokenized once
RUN_OUTPUTS = (
    CONFIG_NAME, STATS_NAME, VOCAB_NAME, SOFTMAX_NAME, CHECKPOINT_NAME, METRICS_NAME, PLOT_NAME,
    WEIGHTS_NAME, OPTIONS_NAME,
)
#: A run moved aside by ``--resume auto`` becomes ``OUT.previous`` (``.previous.2``, ... when taken).
PREVIOUS_SUFFIX = ".previous"


class RunDirectory:
    """The files of the pretraining run in `path` (which need not exist yet)."""

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = Path(path)
        self.checkpoint = self.path / CHECKPOINT_NAME
        self.config = self.path / CONFIG_NAME
        self.metrics = MetricsLog(self.path / METRICS_NAME)
        self.plot = self.path / PLOT_NAME
        self.softmax = self.path / SOFTMAX_NAME
        self.stats = self.path / STATS_NAME
        self.vocab = self.path / VOCAB_NAME
        self.tokenized = self.path / TOKENIZED_NAME

    def check_finished(self) -> None:
        """Raise :class:`InputError` unless the directory holds a model to evaluate."""
        missing = [path.name for path in (self.config, self.vocab, self.softmax) if not path.is_file()]
        if missing:
            raise InputError(f"{self.path} is not a finished pretraining run: no {', '.join(missing)}")

    def read_config(self) -> PretrainConfig:
        return load_config(self.config, {})

    def read_vocab(self) -> Vocabulary:
        return Vocabulary.from_disk(self.vocab)

    def read_stats(self) -> Optional[Dict[str, Any]]:
        """The corpus statistics, or None when the corpus was not counted."""
        if not self.stats.exists():
            return None
        return json.loads(self.stats.read_text(encoding="utf8"))

    def write_config(self, config: PretrainConfig) -> None:
        with atomic_output_path(self.config) as tmp:
            tmp.write_text(config.to_str(), encoding="utf8")

    def write_stats(self, stats: Dict[str, Any]) -> None:
        with atomic_output_path(self.stats) as tmp:
            tmp.write_text(json.dumps(stats, indent=2) + "\n", encoding="utf8")

    def export(self, model: BiLMLanguageModel, vocab: Vocabulary) -> None:
        """Write the original-format biLM (options.json, weights.hdf5), softmax and vocabulary."""
        save_bilm(model.bilm, self.path)
        save_softmax(model.softmax, self.softmax)
        vocab.to_disk(self.vocab)

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
