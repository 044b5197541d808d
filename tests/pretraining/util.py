"""Helpers shared by the pretraining tests."""
from pathlib import Path
from typing import Any, Dict, Optional

from spacy_elmo.pretraining.config import PretrainConfig, parse_config
from spacy_elmo.pretraining.default_config import default_config_text
from spacy_elmo.pretraining.trainer import Trainer


def fast_overrides(train: Path, dev: Optional[Path] = None, **extra: Any) -> Dict[str, Any]:
    """Settings for a fixture-size run of a few seconds (use ``section__key`` for ``section.key``)."""
    overrides: Dict[str, Any] = {
        "paths.train": str(train),
        "paths.dev": str(dev) if dev is not None else None,
        "corpus.tokenizer": "whitespace",
        "corpus.max_window": 12,
        "corpus.shuffle_buffer": 4,
        "vocab.size": 1000,
        "training.tokens_per_step": 48,
        "training.sort_window": 2,
        "training.max_steps": 10,
        "training.log_every": 1,
        "training.eval_every": 1000,
        "training.checkpoint_every": 1000,
        "training.eval_at_start": False,
    }
    overrides.update({key.replace("__", "."): value for key, value in extra.items()})
    return overrides


def fast_config(train: Path, dev: Optional[Path] = None, **extra: Any) -> PretrainConfig:
    return parse_config(default_config_text(size="tiny"), fast_overrides(train, dev, **extra))


def kill_at_step(monkeypatch, n: int):
    """Make the n-th training step raise KeyboardInterrupt; returns the real step."""
    calls = {"n": 0}
    original_step = Trainer.step

    def killed(self, prepared):
        calls["n"] += 1
        if calls["n"] == n:
            raise KeyboardInterrupt
        return original_step(self, prepared)

    monkeypatch.setattr(Trainer, "step", killed)
    return original_step
