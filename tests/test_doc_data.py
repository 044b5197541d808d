"""`doc._.elmo`: the layers, their check against the Doc, msgpack hooks, and contextual vector hooks."""
import re
import types

import numpy
import pytest
import spacy
import srsly
from spacy.language import Language
from spacy.tokens import Doc

from spacy_elmo.doc_data import (
    ElmoDocData,
    doc_data,
    in_spacy_worker_process,
    install_extensions,
    keep_hooks_across_processes,
    restore_vector_hooks,
    set_vector_hooks,
)
from spacy_elmo.errors import DocDataError

install_extensions()


def _layers(n_tokens: int, n_layers: int = 3, width: int = 4) -> numpy.ndarray:
    return numpy.arange(n_layers * n_tokens * width, dtype="f").reshape(n_layers, n_tokens, width) - 10


def _doc(words=("The", "bank", "of", "the", "river"), hooks=None) -> Doc:
    doc = Doc(spacy.blank("en").vocab, words=list(words))
    doc._.elmo = ElmoDocData(_layers(len(doc)), hooks=hooks)
    return doc


@Language.component("spacy_elmo_test_doc_data_layers")
def _add_layers(doc):
    doc._.elmo = ElmoDocData(_layers(len(doc)), hooks="top")  # as a worker process sends it back: no hooks
    return doc


def test_sizes_mean_and_top_of_the_layers():
    data = ElmoDocData(_layers(5))
    assert (data.n_layers, len(data), data.width) == (3, 5, 4)
    numpy.testing.assert_array_equal(data.mean(), data.layers[1])  # arange: the middle layer is the mean
    numpy.testing.assert_array_equal(data.top(), data.layers[2])


def test_a_mix_is_computed_once_and_an_unknown_mix_is_a_key_error():
    data = ElmoDocData(_layers(2))
    assert data.mixed("mean") is data.mixed("mean")
    with pytest.raises(KeyError):
        data.mixed("sum")


def test_doc_data_is_none_without_layers_and_the_layers_when_they_fit():
    doc = _doc()
    assert doc_data(doc) is doc._.elmo and doc_data(Doc(doc.vocab, words=["a"])) is None


def test_layers_for_another_number_of_tokens_are_refused_with_both_counts():
    doc = _doc()
    doc._.elmo = ElmoDocData(_layers(4))
    with pytest.raises(DocDataError, match="holds vectors for 4 tokens but the Doc has 5 "):
        doc_data(doc)


@pytest.mark.parametrize(
    "value, described",
    [(numpy.zeros((5, 4)), "ndarray of shape None"), (ElmoDocData(numpy.zeros((5, 4))), "ElmoDocData of shape (5, 4)")],
)
def test_anything_but_three_dimensional_layers_is_refused_naming_what_it_is(value, described):
    doc = _doc()
    doc._.elmo = value
    with pytest.raises(DocDataError, match=re.escape(f"(got {described}); run the pipeline")):
        doc_data(doc)


def test_msgpack_keeps_the_layers_as_float32_and_the_hooks_only_when_they_name_a_mix():
    data = ElmoDocData(_layers(2).astype("float64"), hooks="top")
    back = srsly.msgpack_loads(srsly.msgpack_dumps({"elmo": data}))["elmo"]
    assert back.layers.dtype == numpy.float32 and back.hooks == "top"
    numpy.testing.assert_array_equal(back.layers, data.layers)
    assert srsly.msgpack_loads(srsly.msgpack_dumps(ElmoDocData(data.layers, hooks="evil"))).hooks is None


def test_layers_travel_with_doc_bytes():
    doc = _doc(hooks="mean")
    again = Doc(doc.vocab).from_bytes(doc.to_bytes())
    numpy.testing.assert_array_equal(again._.elmo.layers, doc._.elmo.layers)
    assert again._.elmo.hooks == "mean" and not again.user_token_hooks


def test_vector_hooks_read_the_mix_for_tokens_spans_and_the_doc():
    doc = _doc()
    set_vector_hooks(doc, "top")
    top = doc._.elmo.layers[-1]
    numpy.testing.assert_array_equal(doc[1].vector, top[1])
    numpy.testing.assert_array_equal(doc[1:3].vector, top[1:3].mean(axis=0))
    numpy.testing.assert_array_equal(doc.vector, top.mean(axis=0))
    numpy.testing.assert_array_equal(doc[2:2].vector, numpy.zeros(4, dtype="f"))
    assert doc[1].has_vector and doc[2:2].has_vector and doc.has_vector


def test_similarity_is_the_cosine_and_zero_for_a_zero_vector():
    doc = _doc()
    set_vector_hooks(doc, "mean")
    a, b = doc[0].vector, doc[4].vector
    assert doc[0].similarity(doc[4]) == pytest.approx(float(a @ b) / float(numpy.linalg.norm(a) * numpy.linalg.norm(b)))
    assert doc[0].similarity(doc[0]) == pytest.approx(1.0) and doc[0].similarity(doc[2:2]) == 0.0


def test_without_layers_the_vector_hooks_read_the_tensor():
    doc = _doc()
    set_vector_hooks(doc, "mean")
    doc._.elmo, doc.tensor = None, numpy.ones((5, 3), dtype="f")  # what doc_cleaner keeps
    numpy.testing.assert_array_equal(doc[2].vector, numpy.ones(3, dtype="f"))


def test_restore_vector_hooks_sets_the_mix_the_layers_name_and_nothing_without_one():
    named, unnamed = _doc(hooks="top"), _doc()
    restore_vector_hooks(named)
    restore_vector_hooks(unnamed)
    numpy.testing.assert_array_equal(named[1].vector, named._.elmo.layers[-1][1])
    assert "similarity" in named.user_token_hooks and not unnamed.user_token_hooks


def test_a_pipe_kept_across_processes_restores_the_hooks_also_with_tuples_and_is_wrapped_once():
    nlp = spacy.blank("en")
    nlp.add_pipe("spacy_elmo_test_doc_data_layers")
    keep_hooks_across_processes(nlp)
    pipe = nlp.pipe
    keep_hooks_across_processes(nlp)
    assert nlp.pipe is pipe
    docs = [*nlp.pipe(["The bank ."]), *(doc for doc, _ in nlp.pipe([("A river .", 1)], as_tuples=True))]
    for doc in docs:
        numpy.testing.assert_array_equal(doc[1].vector, doc._.elmo.layers[-1][1])


def test_in_spacy_worker_process_is_true_only_under_spacys_apply_pipes():
    def _apply_pipes():
        return in_spacy_worker_process()

    scope = {"__name__": "spacy.language", "in_spacy_worker_process": in_spacy_worker_process}
    as_in_spacy = types.FunctionType(_apply_pipes.__code__, scope)  # a function of spacy.language's name
    assert as_in_spacy() is True and _apply_pipes() is False and in_spacy_worker_process() is False
