"""Span getters: how a Doc is cut into the spans the biLM reads one at a time.

The biLM's memory and time grow with the length of what it reads, and ELMo was
trained on sentences, so a Doc is read sentence by sentence when it has
sentence boundaries, and in consecutive spans of at most ``max_length`` tokens
otherwise: a 20,000-token Doc without boundaries is 79 spans of 256 tokens.
Every span is encoded independently of the others.
"""
from functools import partial
from typing import Iterable, Iterator, List

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


def build_doc_spans_v1(*, max_length: int = 256) -> SpanGetterT:
    """Consecutive spans of at most ``max_length`` tokens over the whole Doc,
    ignoring sentence boundaries."""
    _check_max_length(max_length)
    return partial(doc_spans, max_length=max_length)


def sentence_spans(docs: Iterable[Doc], *, max_length: int) -> List[List[Span]]:
    spans = []
    for doc in docs:
        if doc.has_annotation("SENT_START"):
            spans.append([span for sent in doc.sents for span in _cut(sent, max_length)])
        else:
            spans.append(list(_cut(doc[:], max_length)))
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
