"""Errors of the pretraining command; the CLI prints them as one line."""
from ..errors import SpacyElmoError


class ConfigError(SpacyElmoError, ValueError):
    """A pretraining config has an unknown section or key, or an invalid value."""


class CheckpointError(SpacyElmoError):
    """A checkpoint is missing, corrupt, or belongs to a different run."""


class TrainingError(SpacyElmoError, RuntimeError):
    """Training cannot go on (for example: the loss stayed non-finite)."""
