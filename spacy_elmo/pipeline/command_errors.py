"""spacy-elmo's errors inside spaCy's own commands (`spacy train`, `spacy assemble`): no traceback.

While they set a pipeline up, spaCy's commands print a ``ConfigValidationError`` as a ``✘``
title (wrapped at 80 columns) and its description, and exit with 1 (``show_validation_error``);
anything else as a traceback. So an error of the elmo component's initialize is raised as
both: of its own class, as the Python API promises, and a ``ConfigValidationError`` whose
description is its message, printed whole on one line under a short title.
"""
import contextlib
import functools
from typing import Iterator, Type

from confection import ConfigValidationError

from ..errors import SpacyElmoError, one_line

TITLE = "The elmo component could not initialize its biLM"


@contextlib.contextmanager
def one_line_in_spacy_commands() -> Iterator[None]:
    """Re-raise a :class:`SpacyElmoError` as :func:`shown_by_spacy` makes it."""
    try:
        yield
    except SpacyElmoError as err:
        if isinstance(err, ConfigValidationError):
            raise
        raise shown_by_spacy(type(err))(title=TITLE, desc=one_line(err), show_config=False) from None


@functools.lru_cache(maxsize=None)
def shown_by_spacy(kind: Type[SpacyElmoError]) -> type:
    """`kind` that is a ``ConfigValidationError`` too, its text (``str``) the message alone."""
    return type(kind.__name__, (kind, ConfigValidationError), {"__module__": kind.__module__, "__str__": _message})


def _message(error: ConfigValidationError) -> str:
    return error.desc or ""
