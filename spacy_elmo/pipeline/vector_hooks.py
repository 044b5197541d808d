"""Contextual ``.vector`` and ``.similarity`` for tokens, spans and Docs.

The hooks read a mix of ``doc._.elmo`` (:class:`~spacy_elmo.doc_data.ElmoDocData`),
so "bank" of a river and "bank" that lends money get different vectors and a
similarity below 1. Doc hooks are not serialized (spaCy warns W109 on
``Doc.to_bytes``), so in the worker processes of ``nlp.pipe(n_process=2)`` none
are set, and the Docs that come back have none; ``Doc.tensor`` travels, and
spaCy's own fallback reads it for vectors when the vocab has no static vectors
(else call :func:`set_vector_hooks` on them).
"""
import sys
from functools import partial

from spacy.tokens import Doc
from thinc.types import Floats1d, Floats2d

from ..doc_data import doc_data


def set_vector_hooks(doc: Doc, mix: str) -> None:
    """Make token, span and Doc vectors and similarities contextual.

    They read the ``mix`` of ``doc._.elmo`` (the same values as ``Doc.tensor``
    right after the elmo component), so a ``tok2vec`` that later overwrites
    ``Doc.tensor`` does not change them; without ``doc._.elmo`` (dropped by
    ``doc_cleaner``) they read ``Doc.tensor``.
    """
    token_vector, span_vector = partial(_token_vector, mix=mix), partial(_span_vector, mix=mix)
    doc.user_token_hooks["vector"] = token_vector
    doc.user_token_hooks["has_vector"] = _has_vector
    doc.user_span_hooks["vector"] = span_vector
    doc.user_span_hooks["has_vector"] = _has_vector
    doc.user_hooks["vector"] = span_vector
    doc.user_hooks["has_vector"] = _has_vector
    for hooks in (doc.user_token_hooks, doc.user_span_hooks, doc.user_hooks):
        hooks["similarity"] = _cosine_similarity


def in_spacy_worker_process() -> bool:
    """True when called under ``nlp.pipe(n_process>1)``'s worker (spaCy's
    ``_apply_pipes``), which sends every Doc back as bytes: hooks cannot travel,
    and setting them would only make spaCy warn W109 for each Doc."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_apply_pipes" and frame.f_globals.get("__name__") == "spacy.language":
            return True
        frame = frame.f_back
    return False


def _contextual_vectors(doc: Doc, mix: str) -> Floats2d:
    data = doc_data(doc)
    return doc.tensor if data is None else data.mixed(mix)


def _token_vector(token, mix: str) -> Floats1d:
    return _contextual_vectors(token.doc, mix)[token.i]


def _span_vector(span, mix: str) -> Floats1d:
    """The mean of the span's (or Doc's) token vectors; zeros when empty."""
    vectors = _contextual_vectors(span.doc, mix)
    if len(span) == 0:
        return vectors[:1].sum(axis=0) * 0
    rows = vectors[span.start : span.end] if hasattr(span, "start") else vectors
    return rows.mean(axis=0)


def _has_vector(obj) -> bool:
    return True


def _cosine_similarity(obj, other) -> float:
    a, b = obj.vector, other.vector
    norms = float((a**2).sum() ** 0.5) * float((b**2).sum() ** 0.5)
    if a.shape != b.shape or norms == 0.0:
        return 0.0
    return float((a * b).sum()) / norms
