"""Span getters: how a Doc is cut into the spans the biLM reads one at a time.

ELMo was trained on sentences and its cost grows with length, so each sentence is cut into spans of at most
``max_length`` tokens, encoded independently: a sentence gets the same layers inside a paragraph as alone. ``v2``
finds sentences by the ``sentencizer``'s rules where no component set them, without writing them onto the Doc.
"""
from functools import partial
from typing import Iterable, Iterator, List, Optional, Sequence

from spacy.pipeline import Sentencizer
from spacy.tokens import Doc, Span

from ..errors import SettingsError
from .types import SpanGetterT


def build_sentence_spans_v1(*, max_length: int = 256) -> SpanGetterT:
    """Sentences when the Doc has sentence boundaries, spans of at most
    ``max_length`` tokens otherwise.

    max_length (int): the most tokens in one span; longer sentences are cut
        into consecutive spans.
    """
    _check_max_length(max_length)
    return partial(sentence_spans, max_length=max_length)


def build_sentence_spans_v2(*, max_length: int = 256, punct_chars: Optional[Sequence[str]] = None) -> SpanGetterT:
    """Sentences: the Doc's own boundaries when it has them, else those that
    spaCy's ``sentencizer`` rules find (not written onto the Doc); sentences
    longer than ``max_length`` tokens are cut into consecutive spans.

    punct_chars (Optional[List[str]]): the tokens that end a sentence (null:
        the sentencizer's default list, which covers many scripts).
    """
    _check_max_length(max_length)
    sentencizer = Sentencizer(punct_chars=list(punct_chars) if punct_chars else None)
    return partial(sentence_spans, sentencizer=sentencizer, max_length=max_length)


def build_doc_spans_v1(*, max_length: int = 256) -> SpanGetterT:
    """Consecutive spans of at most ``max_length`` tokens over the whole Doc,
    ignoring sentence boundaries."""
    _check_max_length(max_length)
    return partial(doc_spans, max_length=max_length)


def sentence_spans(
    docs: Iterable[Doc], *, max_length: int, sentencizer: Optional[Sentencizer] = None
) -> List[List[Span]]:
    """Each Doc's sentences (its own, else the `sentencizer`'s, else the whole Doc), cut to `max_length` tokens."""
    spans = []
    for doc in docs:
        if doc.has_annotation("SENT_START"):
            sentences: Iterable[Span] = doc.sents
        elif sentencizer is None:
            sentences = [doc[:]]
        else:
            starts = [i for i, start in enumerate(sentencizer.predict([doc])[0]) if start]
            sentences = (doc[start:end] for start, end in zip(starts, starts[1:] + [len(doc)]))
        spans.append([span for sentence in sentences for span in _cut(sentence, max_length)])
    return spans


def doc_spans(docs: Iterable[Doc], *, max_length: int) -> List[List[Span]]:
    return [list(_cut(doc[:], max_length)) for doc in docs]


def _cut(span: Span, max_length: int) -> Iterator[Span]:
    """`span` as consecutive spans of at most `max_length` tokens."""
    for start in range(span.start, span.end, max_length):
        yield span.doc[start : min(start + max_length, span.end)]


def _check_max_length(max_length: int) -> None:
    if max_length < 1:
        raise SettingsError(f"get_spans.max_length must be a positive number of tokens, got {max_length}")
