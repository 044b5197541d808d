"""Errors with messages that name the offending file, line or value."""


class SpacyElmoError(Exception):
    """Base class: the command-line interface prints these without a traceback."""


class OptionsError(SpacyElmoError, ValueError):
    """`options.json` is missing a key or holds an invalid value."""


class WeightsError(SpacyElmoError, ValueError):
    """A weights file does not match its options (missing dataset, wrong shape)."""


class InputError(SpacyElmoError, ValueError):
    """An input file cannot be read (missing, undecodable, malformed)."""
