"""spacy-elmo's errors inside spaCy's own commands (`spacy train`, `spacy assemble`): no traceback.

spaCy's commands print a ``ConfigValidationError`` as a title and its description (``show_validation_error``), and
anything else as a traceback; so an initialize error is raised as both its own class and a ``ConfigValidationError``.
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
