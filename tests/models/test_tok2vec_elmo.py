"""Tok2VecElmo: a biLM and a task head in one model, and what replace_listeners builds from
a listener. A stand-in biLM (fixed layers) records how it is run and what reaches it."""
from types import SimpleNamespace

import numpy
import pytest
import spacy
from thinc.api import Model

from spacy_elmo.models.scalar_mix_layer import build_scalar_mix_v1
from spacy_elmo.models.task_head import build_task_head
from spacy_elmo.models.tok2vec_elmo import (
    build_tok2vec_elmo_v1,
    replace_listener,
    replace_listener_cfg,
    tok2vec_elmo,
)

N_LAYERS, WIDTH = 3, 4


def _bilm(sized=True) -> Model:
    """Layers (N_LAYERS, tokens, WIDTH) of 1, 2, 3; its attrs record each run's is_train
    and the gradients its backprop receives."""

    def forward(model, docs, is_train):
        model.attrs["runs"].append(is_train)
        layers = [numpy.arange(1, N_LAYERS + 1, dtype="f")[:, None, None].repeat(len(d), 1).repeat(WIDTH, 2) for d in docs]
        return layers, lambda d_layers: model.attrs["received"].append(d_layers) or []

    def init(model, X=None, Y=None):
        model.set_dim("nL", N_LAYERS)
        model.set_dim("nO", WIDTH)

    dims = {"nL": N_LAYERS, "nO": WIDTH} if sized else {"nL": None, "nO": None}
    return Model("bilm", forward, init=init, dims=dims, attrs={"runs": [], "received": []})


def _docs():
    nlp = spacy.blank("en")
    return [nlp("a b c"), nlp("d e")]


def test_the_output_is_the_heads_mix_of_the_bilm_layers_and_its_width_the_heads():
    model = build_tok2vec_elmo_v1(bilm=_bilm(sized=False), mixer=build_scalar_mix_v1(initial_weights=[0.0, 0.0, 0.0]))
    assert not model.has_dim("nO")
    docs = _docs()
    model.initialize(X=docs)
    assert model.get_dim("nO") == WIDTH
    Y = model.predict(docs)
    assert [y.shape for y in Y] == [(3, WIDTH), (2, WIDTH)]
    numpy.testing.assert_allclose(Y[0], numpy.full((3, WIDTH), 2.0), rtol=1e-6)  # the mean of 1, 2, 3


def test_a_sized_bilm_sizes_the_head_at_once():
    assert tok2vec_elmo(_bilm(), build_task_head(mixer=build_scalar_mix_v1()), frozen=True, grad_factor=1.0
                        ).get_dim("nO") == WIDTH


@pytest.mark.parametrize("frozen,is_train", [(True, True), (False, False), (True, False)])
def test_a_frozen_bilm_or_prediction_runs_the_bilm_to_predict_and_sends_it_no_gradient(frozen, is_train):
    bilm = _bilm()
    model = tok2vec_elmo(bilm, build_task_head(mixer=build_scalar_mix_v1()), frozen=frozen, grad_factor=1.0)
    docs = _docs()
    model.initialize(X=docs)
    bilm.attrs["runs"].clear()
    Y, backprop = model(docs, is_train=is_train)
    assert backprop([numpy.ones_like(y) for y in Y]) == []
    assert bilm.attrs["runs"] == [False] and bilm.attrs["received"] == []


@pytest.mark.parametrize("grad_factor", [1.0, 0.5])
def test_a_fine_tuned_bilm_gets_the_heads_gradients_times_grad_factor(grad_factor):
    bilm = _bilm()
    model = tok2vec_elmo(bilm, build_task_head(mixer=build_scalar_mix_v1()), frozen=False, grad_factor=grad_factor)
    docs = _docs()
    model.initialize(X=docs)
    bilm.attrs["runs"].clear()
    Y, backprop = model(docs, is_train=True)
    backprop([numpy.ones_like(y) for y in Y])
    assert bilm.attrs["runs"] == [True]
    (received,) = bilm.attrs["received"]
    # d(gamma * mean of layers) / d layer = 1/3 per layer
    for d, doc in zip(received, docs):
        numpy.testing.assert_allclose(d, numpy.full((N_LAYERS, len(doc), WIDTH), grad_factor / 3), rtol=1e-5)


def test_replace_listener_moves_the_listeners_head_with_its_grad_factor_and_the_pipes_frozen():
    head, bilm = build_task_head(mixer=build_scalar_mix_v1()), _bilm()
    listener = Model("listener", lambda model, X, is_train: None, layers=[head], attrs={"grad_factor": 0.25})
    model = replace_listener(bilm, listener, SimpleNamespace(frozen=False))
    assert model.layers == [bilm, head]
    assert model.attrs["frozen"] is False and model.attrs["grad_factor"] == 0.25


def test_replace_listener_cfg_keeps_the_listeners_head_settings_only():
    listener_cfg = {"@architectures": "spacy-elmo.ElmoListener.v1", "upstream": "elmo", "mixer": {"m": 1},
                    "width": 8, "grad_factor": 0.5}
    assert replace_listener_cfg({"b": 1}, listener_cfg, frozen=True) == {
        "@architectures": "spacy-elmo.Tok2VecElmo.v1", "bilm": {"b": 1}, "frozen": True,
        "mixer": {"m": 1}, "width": 8, "grad_factor": 0.5,
    }
