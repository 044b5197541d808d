"""Span getters: sentences (the Doc's or found by rules), bounded spans."""
import pytest
import spacy
from spacy.tokens import Doc

from spacy_elmo.errors import SettingsError
from spacy_elmo.models.spans import build_doc_spans_v1, build_sentence_spans_v1, build_sentence_spans_v2


@pytest.fixture(scope="module")
def vocab():
    return spacy.blank("en").vocab


def _texts(spans):
    return [[span.text for span in doc_spans] for doc_spans in spans]


def test_sentences_when_the_doc_has_them(vocab):
    doc = Doc(vocab, words="a b c . d e .".split(), sent_starts=[1, 0, 0, 0, 1, 0, 0])
    assert _texts(build_sentence_spans_v1(max_length=10)([doc])) == [["a b c .", "d e ."]]
    # Long sentences are cut into spans of at most max_length tokens.
    assert _texts(build_sentence_spans_v1(max_length=3)([doc])) == [["a b c", ".", "d e ."]]


def test_bounded_spans_without_sentence_boundaries(vocab):
    docs = [Doc(vocab, words=list("abcdefg")), Doc(vocab, words=[])]
    assert _texts(build_sentence_spans_v1(max_length=3)(docs)) == [["a b c", "d e f", "g"], []]
    assert sum(len(s) for s in build_sentence_spans_v1(max_length=256)([Doc(vocab, words=["w"] * 1000)])[0]) == 1000


def test_v2_takes_the_docs_own_sentences(vocab):
    doc = Doc(vocab, words="a b . c d e".split(), sent_starts=[1, 0, 0, 0, 1, 0])
    assert _texts(build_sentence_spans_v2(max_length=10)([doc])) == [["a b . c", "d e"]]
    assert _texts(build_sentence_spans_v2(max_length=3)([doc])) == [["a b .", "c", "d e"]]


def test_v2_finds_sentences_without_writing_them(vocab):
    doc = Doc(vocab, words='It rained . " Go home ! " she said . ok'.split())
    spans = build_sentence_spans_v2(max_length=256)([doc, Doc(vocab, words=[])])
    # The sentencizer's rules: a sentence ends after ., ! or ? and the punctuation that follows.
    assert _texts(spans) == [["It rained . \"", "Go home ! \"", "she said .", "ok"], []]
    assert not doc.has_annotation("SENT_START")
    assert _texts(build_sentence_spans_v2(max_length=2)([doc]))[0][:3] == ["It rained", ". \"", "Go home"]


def test_v2_takes_other_sentence_ends(vocab):
    doc = Doc(vocab, words="a b ; c d ; e".split())
    assert _texts(build_sentence_spans_v2(punct_chars=[";"])([doc])) == [["a b ;", "c d ;", "e"]]


def test_doc_spans_ignore_sentences(vocab):
    doc = Doc(vocab, words="a b . c d .".split(), sent_starts=[1, 0, 0, 1, 0, 0])
    assert _texts(build_doc_spans_v1(max_length=4)([doc])) == [["a b . c", "d ."]]


@pytest.mark.parametrize("build", [build_sentence_spans_v1, build_sentence_spans_v2, build_doc_spans_v1])
def test_max_length_must_be_positive(build):
    with pytest.raises(SettingsError, match="^get_spans.max_length must be a positive number of tokens, got 0$"):
        build(max_length=0)
