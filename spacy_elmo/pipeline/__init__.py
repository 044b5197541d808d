"""spaCy pipeline components."""
from .elmo import ElmoComponent, make_elmo

__all__ = ["ElmoComponent", "make_elmo"]
