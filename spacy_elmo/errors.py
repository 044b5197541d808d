"""Errors with messages that name the offending file, line or value."""
import math
from typing import Optional


def one_line(err: object, limit: Optional[int] = None) -> str:
    """`err`'s message on one line (whitespace collapsed), cut at `limit` characters."""
    text = " ".join(str(err).split())
    return text if limit is None else text[:limit]


def shown(value: object) -> str:
    """`value` for a message: its repr, cut short when long (a 400-digit number)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


def is_finite_number(value: object) -> bool:
    """Whether `value` is what a number setting must be: an int or float (not a bool), finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float (400 digits)
        return False


class SpacyElmoError(Exception):
    """Base class: the command-line interface prints these without a traceback."""


class OptionsError(SpacyElmoError, ValueError):
    """`options.json` is missing a key or holds an invalid value."""


class SettingsError(OptionsError):
    """A setting of a component, layer or command holds an invalid value.

    A subclass of :class:`OptionsError`, so code that catches that still catches these.
    """


class WeightsError(SpacyElmoError, ValueError):
    """A weights file does not match its options (missing dataset, wrong shape)."""


class InputError(SpacyElmoError, ValueError):
    """An input file cannot be read (missing, undecodable, malformed)."""


class DocDataError(SpacyElmoError, ValueError):
    """``doc._.elmo`` does not fit its Doc (changed tokens, altered bytes)."""


class ConfigError(SpacyElmoError, ValueError):
    """A pretraining config has an unknown section or key, or an invalid value."""


class CheckpointError(SpacyElmoError):
    """A checkpoint is missing, corrupt, or belongs to a different run."""


class TrainingError(SpacyElmoError, RuntimeError):
    """Training cannot go on (for example: the loss stayed non-finite)."""
