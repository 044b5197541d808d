"""Static vectors by name, for a pipeline's ``[initialize]``.

Unlike spaCy's ``[initialize] vectors`` (a path or a package), this callback also takes the name of vectors shipped
with a biLM (``"english-compact"``), or nothing for the language's shipped vectors, so a config needs no files.
"""
from typing import Callable, Optional

from spacy.language import Language
from spacy.training.initialize import load_vectors_into_model

from ..named_models import default_vectors, locate_vectors


def create_static_vectors_loader_v1(
    vectors: Optional[str] = None, lang: Optional[str] = None
) -> Callable[[Language], Language]:
    """A ``before_init`` callback that loads `vectors` (a shipped name, a spaCy vectors
    directory, or ``None``: the vectors shipped for `lang`) into the pipeline's vocab
    before its components initialize."""
    if vectors is None:
        vectors = default_vectors(lang or "")
    directory = locate_vectors(vectors)

    def load_static_vectors(nlp: Language) -> Language:
        load_vectors_into_model(nlp, directory)
        return nlp

    return load_static_vectors
