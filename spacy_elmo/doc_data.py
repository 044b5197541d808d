"""What the elmo component keeps on each Doc: ``doc._.elmo``.

It serializes with the Doc through srsly msgpack hooks registered on import (not an srsly entry point: srsly loads
those while spaCy imports), so import this module before reading Docs saved elsewhere. Doc hooks are not serialized
(W109): on Docs read from bytes outside the pipeline's ``nlp.pipe``, call :func:`restore_vector_hooks`.
"""
import sys
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Dict, Iterator, Optional

import numpy
import srsly
from spacy.language import Language
from spacy.tokens import Doc
from thinc.types import Floats1d, Floats2d, Floats3d
from thinc.util import to_numpy

from .errors import DocDataError

EXTENSION = "elmo"
_MSGPACK_KEY = "__spacy_elmo_doc_data__"


@dataclass
class ElmoDocData:
    """Every biLM layer of one Doc.

    ``layers``: *Shape:* ``(n_layers, n_tokens, 2 * projection_dim)``, float32; layer 0 is ``[x; x]``, layer j
    (1..L) ``[forward_j; backward_j]``; whitespace tokens are zeros. ``hooks``: the mix the Doc's vector hooks read
    (:func:`set_vector_hooks`), None without hooks."""

    layers: Floats3d
    hooks: Optional[str] = None

    @property
    def n_layers(self) -> int:
        return self.layers.shape[0]

    @property
    def width(self) -> int:
        return self.layers.shape[2]

    def __len__(self) -> int:
        return self.layers.shape[1]

    def mean(self) -> Floats2d:
        """The average of all layers, *Shape:* ``(n_tokens, width)``."""
        return self.layers.mean(axis=0)

    def top(self) -> Floats2d:
        """The last biLSTM layer, *Shape:* ``(n_tokens, width)``."""
        return self.layers[-1]

    def mixed(self, name: str) -> Floats2d:
        """``DOC_TENSOR_MIXES[name]`` of the layers, computed once per Doc."""
        cache = self.__dict__.setdefault("_mixed", {})
        if name not in cache:
            cache[name] = DOC_TENSOR_MIXES[name](self)
        return cache[name]


#: How ``Doc.tensor`` is filled from the layers (the component's ``doc_tensor``).
DOC_TENSOR_MIXES: Dict[str, Callable[[ElmoDocData], Floats2d]] = {
    "mean": ElmoDocData.mean,
    "top": ElmoDocData.top,
}


def doc_data(doc: Doc) -> Optional[ElmoDocData]:
    """``doc._.elmo``, checked against the Doc: one row of vectors per token.

    A Doc read from bytes or a DocBin carries whatever its bytes say, and a Doc
    retokenized after the elmo component no longer matches its layers.
    """
    data = doc._.get(EXTENSION)
    if data is None:
        return None
    layers = getattr(data, "layers", None)
    shape = getattr(layers, "shape", None)
    if not isinstance(data, ElmoDocData) or shape is None or len(shape) != 3:
        raise DocDataError(
            f"doc._.{EXTENSION} is not ELMo layers of shape (n_layers, n_tokens, width) "
            f"(got {type(data).__name__} of shape {shape}); run the pipeline on the text again"
        )
    if shape[1] != len(doc):
        raise DocDataError(
            f"doc._.{EXTENSION} holds vectors for {shape[1]} tokens but the Doc has {len(doc)} "
            f"(the Doc was retokenized after the elmo component, or its bytes were altered); "
            f"run the pipeline on the text again"
        )
    return data


def install_extensions() -> None:
    """Register ``Doc._.elmo`` (idempotent; worker processes call it too)."""
    if not Doc.has_extension(EXTENSION):
        Doc.set_extension(EXTENSION, default=None)


def encode_doc_data(obj: Any, chain: Optional[Callable] = None) -> Any:
    """srsly msgpack encoder: ElmoDocData to a tagged dict."""
    if isinstance(obj, ElmoDocData):
        layers = numpy.ascontiguousarray(to_numpy(obj.layers), dtype=numpy.float32)
        return {_MSGPACK_KEY: {"layers": layers, "hooks": obj.hooks}}
    return obj if chain is None else chain(obj)


def decode_doc_data(obj: Any, chain: Optional[Callable] = None) -> Any:
    """srsly msgpack decoder: the tagged dict back to ElmoDocData."""
    if isinstance(obj, dict) and _MSGPACK_KEY in obj:
        hooks = obj[_MSGPACK_KEY].get("hooks")
        return ElmoDocData(layers=obj[_MSGPACK_KEY]["layers"], hooks=hooks if hooks in DOC_TENSOR_MIXES else None)
    return obj if chain is None else chain(obj)


def set_vector_hooks(doc: Doc, mix: str) -> None:
    """Make token, span and Doc vectors and similarities contextual.

    They read the ``mix`` of ``doc._.elmo``, so a ``tok2vec`` that later overwrites ``Doc.tensor`` does not change
    them; without ``doc._.elmo`` (dropped by ``doc_cleaner``) they read ``Doc.tensor``.
    """
    token_vector, span_vector = partial(_token_vector, mix=mix), partial(_span_vector, mix=mix)
    vectors = ((doc.user_token_hooks, token_vector), (doc.user_span_hooks, span_vector), (doc.user_hooks, span_vector))
    for hooks, vector in vectors:
        hooks.update(vector=vector, has_vector=_has_vector, similarity=_cosine_similarity)


def restore_vector_hooks(doc: Doc) -> None:
    """Set the vector hooks that ``doc._.elmo`` names, on a Doc read from bytes without them."""
    data = doc._.get(EXTENSION) if Doc.has_extension(EXTENSION) else None
    if isinstance(data, ElmoDocData) and data.hooks is not None and "similarity" not in doc.user_token_hooks:
        set_vector_hooks(doc, data.hooks)


class _PipeRestoringHooks:
    """``nlp.pipe`` whose Docs have their vector hooks, also those that worker processes
    send back as bytes (``n_process`` > 1)."""

    def __init__(self, nlp: Language) -> None:
        self.nlp = nlp

    def __call__(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for item in type(self.nlp).pipe(self.nlp, *args, **kwargs):
            restore_vector_hooks(item[0] if isinstance(item, tuple) else item)  # (doc, context) with as_tuples
            yield item


def keep_hooks_across_processes(nlp: Language) -> None:
    """Make ``nlp.pipe`` restore the vector hooks of the Docs it yields (once per pipeline)."""
    if not isinstance(nlp.__dict__.get("pipe"), _PipeRestoringHooks):
        nlp.pipe = _PipeRestoringHooks(nlp)  # type: ignore[method-assign]


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


srsly.msgpack_encoders.register("spacy_elmo.doc_data", func=encode_doc_data)
srsly.msgpack_decoders.register("spacy_elmo.doc_data", func=decode_doc_data)
