"""A task's head: its own mix of the biLM layers, beside a token embedding, optionally projected."""
import numpy
import pytest
import spacy
from thinc.api import Model

from spacy_elmo.errors import SettingsError
from spacy_elmo.models.scalar_mix_layer import build_scalar_mix_v1
from spacy_elmo.models.task_head import build_task_head, zero_layers


def _embedding(width: int) -> Model:
    """Each token's vector: its position, repeated `width` times."""

    def forward(model, docs, is_train):
        vectors = [model.ops.asarray2f(numpy.repeat(numpy.arange(len(d), dtype="f")[:, None], width, axis=1)) for d in docs]
        return vectors, lambda d_vectors: []

    return Model("positions", forward, dims={"nO": width})


def _inputs():
    nlp = spacy.blank("en")
    docs = [nlp("a b c"), nlp("d e")]
    layers = [numpy.random.default_rng(i).normal(size=(3, len(d), 4)).astype("f") for i, d in enumerate(docs)]
    return docs, layers


def test_the_head_is_the_embedding_beside_the_mix_and_the_gradient_reaches_the_mix():
    docs, layers = _inputs()
    head = build_task_head(mixer=build_scalar_mix_v1(initial_weights=[1.0, 0.0, 0.0]), token_embedding=_embedding(2))
    head.initialize(X=(docs, layers))
    assert head.get_dim("nO") == 2 + 4
    Y, backprop = head((docs, layers), is_train=True)
    weights = numpy.exp([1.0, 0.0, 0.0]) / numpy.exp([1.0, 0.0, 0.0]).sum()
    for doc, y, doc_layers in zip(docs, Y, layers):
        numpy.testing.assert_allclose(y[:, :2], numpy.arange(len(doc))[:, None].repeat(2, axis=1))
        numpy.testing.assert_allclose(y[:, 2:], numpy.tensordot(weights, doc_layers, axes=1), rtol=1e-5)
    d_layers = backprop([numpy.ones_like(y) for y in Y])
    assert [d.shape for d in d_layers] == [layer.shape for layer in layers]
    numpy.testing.assert_allclose(d_layers[0][:, 0, 0], weights, rtol=1e-5)  # d mix / d layer_j = softmax(s)_j


def test_a_projection_gives_its_width_and_no_size_before_initialization_is_one_line():
    docs, layers = _inputs()
    head = build_task_head(mixer=build_scalar_mix_v1(), token_embedding=_embedding(2), width=7)
    head.initialize(X=(docs, layers))
    Y, _ = head((docs, layers), is_train=False)
    assert [y.shape for y in Y] == [(3, 7), (2, 7)]
    with pytest.raises(SettingsError, match="does not know its biLM's size yet"):
        zero_layers(build_task_head(mixer=build_scalar_mix_v1()), docs)
