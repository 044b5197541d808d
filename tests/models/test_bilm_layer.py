"""The biLM as a Thinc layer: Docs in, every layer of every token out."""
import numpy
import pytest
import spacy
import torch
from spacy.tokens import Doc

from spacy_elmo.errors import SettingsError, WeightsError
from spacy_elmo.models.bilm_layer import build_bilm_layer_v1, get_bilm, load_weights
from spacy_elmo.models.loaders import build_original_weights_loader_v1
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.models.spans import build_sentence_spans_v1

from ..sync_checks import no_host_sync


@pytest.fixture(scope="module")
def vocab():
    return spacy.blank("en").vocab


@pytest.fixture()
def loader(allennlp_model_dir):
    return build_original_weights_loader_v1(path=allennlp_model_dir / "lm_weights.hdf5")


def _bilm_layer(loader=None, **kwargs):
    kwargs.setdefault("get_spans", build_sentence_spans_v1(max_length=4))
    return build_bilm_layer_v1(weights_loader=loader, **kwargs)


def _direct(model, words):
    with torch.no_grad():
        return get_bilm(model)(batch_to_char_ids([words])).layers[0].numpy()


def test_outputs_every_layer_per_token_span_by_span(vocab, loader):
    model = _bilm_layer(loader)
    model.initialize()
    assert (model.get_dim("nL"), model.get_dim("nO")) == (3, 32)
    docs = [Doc(vocab, words="the bank of the river was muddy".split()), Doc(vocab, words=[])]
    layers = model.predict(docs)
    assert [x.shape for x in layers] == [(3, 7, 32), (3, 0, 32)]
    # max_length 4: the spans "the bank of the" and "river was muddy" are read apart.
    numpy.testing.assert_allclose(layers[0][:, :4], _direct(model, "the bank of the".split()), atol=1e-6)
    numpy.testing.assert_allclose(layers[0][:, 4:], _direct(model, "river was muddy".split()), atol=1e-6)


def test_whitespace_tokens_are_skipped_and_zero(vocab, loader):
    model = _bilm_layer(loader, get_spans=build_sentence_spans_v1(max_length=256))
    model.initialize()
    doc = Doc(vocab, words=["bank", "\n\n", "river", " "], spaces=[False, False, False, False])
    layers = model.predict([doc])[0]
    assert not layers[:, [1, 3]].any()
    numpy.testing.assert_allclose(layers[:, [0, 2]], _direct(model, ["bank", "river"]), atol=1e-6)


def test_training_forward_matches_prediction_and_backpropagates(vocab, loader):
    model = _bilm_layer(loader)
    model.initialize()
    docs = [Doc(vocab, words="a b c d e f".split()), Doc(vocab, words=["g"])]
    predicted = model.predict(docs)
    layers, backprop = model(docs, is_train=True)
    for p, x in zip(predicted, layers):
        numpy.testing.assert_allclose(p, x, atol=1e-6)
    assert backprop([numpy.ones_like(x) for x in layers]) == []
    bilm = get_bilm(model)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in bilm.lstm.parameters())


def test_size_builds_a_random_biLM_and_conflicts_are_errors(vocab, loader):
    model = _bilm_layer(size="tiny")
    assert model.get_dim("nO") == 32 and get_bilm(model) is not None
    assert model.predict([Doc(vocab, words=["x"])])[0].shape == (3, 1, 32)
    with pytest.raises(SettingsError, match="not both"):
        _bilm_layer(loader, size="tiny")
    with pytest.raises(SettingsError, match="Unknown biLM size 'huge'"):
        _bilm_layer(size="huge")


def test_no_weights_is_a_clear_error(vocab):
    model = _bilm_layer()
    with pytest.raises(WeightsError, match="weights_loader"):
        model.initialize()
    with pytest.raises(WeightsError, match="weights_loader"):
        model.predict([Doc(vocab, words=["x"])])
    with pytest.raises(WeightsError, match="not an ElmoBiLM"):
        load_weights(model, lambda: "weights")


def test_initialize_keeps_loaded_weights(vocab, loader):
    model = _bilm_layer(loader)
    model.initialize()
    bilm = get_bilm(model)
    model.initialize()
    assert get_bilm(model) is bilm


def test_serialization_carries_the_options(vocab, loader):
    model = _bilm_layer(loader)
    empty = _bilm_layer().from_bytes(_bilm_layer().to_bytes())
    assert get_bilm(empty) is None
    model.initialize()
    loaded = _bilm_layer().from_bytes(model.to_bytes())
    assert get_bilm(loaded).options == get_bilm(model).options
    assert loaded.get_dim("nL") == 3
    doc = Doc(vocab, words="a b c d e".split())
    numpy.testing.assert_array_equal(loaded.predict([doc])[0], model.predict([doc])[0])


def test_prediction_after_an_update_uses_the_new_weights(vocab):
    """Thinc's optimizer writes into the parameters' memory; prepacked weight
    copies (and cached token vectors) made before the update must not be used."""
    from thinc.api import Adam

    model = _bilm_layer(size="tiny", get_spans=build_sentence_spans_v1(max_length=256))
    model.initialize()
    docs = [Doc(vocab, words=f"the {w} river bank was muddy today".split()) for w in "abcdefgh"]
    before = model.predict(docs)
    outputs, backprop = model.begin_update(docs)
    backprop([numpy.ones_like(x) for x in outputs])
    model.finish_update(Adam(0.01))
    after = model.predict(docs)
    fresh = _bilm_layer(size="tiny", get_spans=build_sentence_spans_v1(max_length=256))
    fresh.from_bytes(model.to_bytes())
    expected = fresh.predict(docs)
    assert not numpy.allclose(after[0], before[0], atol=1e-3)
    for got, want in zip(after, expected):
        numpy.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_component_s_prediction_does_not_synchronise(allennlp_model_dir):
    """The elmo component with its biLM on meta (a stand-in GPU): nothing waits for the
    device but the copy of each batch's layers to the host."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"batch_size": 2}})
    nlp.config["initialize"]["components"]["elmo"] = {
        "weights_loader": {"@misc": "spacy-elmo.original_weights.v1", "path": str(allennlp_model_dir / "lm_weights.hdf5")}
    }
    nlp.initialize()
    get_bilm(nlp.get_pipe("elmo").model).to("meta")
    texts = ["The bank of the river was muddy.", "one", "A longer text. It has two sentences, and a comma!"] * 2
    with no_host_sync() as copies_back:
        docs = list(nlp.pipe(texts, batch_size=3))
    assert [doc._.elmo.layers.shape for doc in docs] == [(3, len(doc), 32) for doc in docs]
    assert sum(shape[0] for shape in copies_back) == 8  # sentences
    assert all(shape[1:2] + shape[3:] == (3, 32) for shape in copies_back)
