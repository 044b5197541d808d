"""ElmoListener: widths, reading doc data, receiving from the elmo component."""
import numpy
import pytest
from spacy.ml.models.tok2vec import get_tok2vec_width

from spacy_elmo.doc_data import ElmoDocData
from spacy_elmo.errors import SettingsError
from spacy_elmo.models.listener import ElmoListener

from ..pipeline.util import elmo_nlp, hash_embed_config, listener_config, train_examples


@pytest.fixture(scope="module")
def weights(allennlp_model_dir):
    return allennlp_model_dir / "lm_weights.hdf5"


@pytest.mark.parametrize(
    "overrides,width",
    [
        ({}, 32),  # the mix alone: 2 * projection_dim
        ({"token_embedding": hash_embed_config(16)}, 48),  # [x_k; ELMo_k]
        ({"token_embedding": hash_embed_config(16), "width": 24}, 24),  # projected
        ({"width": 40}, 40),
    ],
)
def test_listener_widths(weights, overrides, width):
    nlp = elmo_nlp(weights, listener=listener_config(**overrides))
    tagger = nlp.get_pipe("tagger")
    listener = tagger.model.get_ref("tok2vec")
    assert isinstance(listener, ElmoListener)
    assert listener.get_dim("nO") == width == get_tok2vec_width(tagger.model)
    doc = nlp("The bank of the river.")
    assert listener.predict([doc])[0].shape == (len(doc), width)
    assert listener.predict([nlp.make_doc("")])[0].shape == (0, width)


def test_width_is_known_once_linked_to_an_initialized_elmo(weights):
    nlp = elmo_nlp(weights, initialize=False)
    listener = nlp.get_pipe("tagger").model.get_ref("tok2vec")
    assert not listener.has_dim("nO")
    with pytest.raises(SettingsError, match="does not know its biLM's size"):
        listener.initialize(X=[nlp.make_doc("a")])
    nlp.initialize(get_examples=lambda: train_examples(nlp))
    assert listener.get_dim("nO") == 32


def test_prediction_reads_doc_data_and_zeros_without(weights):
    nlp = elmo_nlp(weights)
    listener = nlp.get_pipe("tagger").model.get_ref("tok2vec")
    doc = nlp.make_doc("a b")
    numpy.testing.assert_array_equal(listener.predict([doc])[0], numpy.zeros((2, 32), dtype="f"))
    doc._.elmo = ElmoDocData(numpy.ones((3, 2, 32), dtype="f"))
    numpy.testing.assert_allclose(listener.predict([doc])[0], numpy.ones((2, 32)), rtol=1e-6)


def test_received_outputs_must_match_the_batch(weights):
    nlp = elmo_nlp(weights)
    listener = nlp.get_pipe("tagger").model.get_ref("tok2vec")
    docs = [nlp.make_doc("a b")]
    listener.receive(ElmoListener.get_batch_id(docs), [numpy.ones((3, 2, 32), dtype="f")], lambda d: [])
    with pytest.raises(ValueError, match="another batch"):
        listener([nlp.make_doc("c d")], is_train=True)


def test_grad_factor_scales_what_goes_upstream(weights):
    nlp = elmo_nlp(weights, listener=listener_config(grad_factor=0.5))
    listener = nlp.get_pipe("tagger").model.get_ref("tok2vec")
    docs = [nlp.make_doc("a b")]
    received = []
    listener.receive(ElmoListener.get_batch_id(docs), [numpy.ones((3, 2, 32), dtype="f")], received.append)
    Y, backprop = listener(docs, is_train=True)
    backprop([numpy.ones_like(y) for y in Y])
    # d(gamma * mean of layers) / d layer = 1/3 per layer; times grad_factor 0.5
    numpy.testing.assert_allclose(received[0][0], numpy.full((3, 2, 32), 0.5 / 3), rtol=1e-5)
    assert listener._batch_id is None  # consumed
