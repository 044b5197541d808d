"""Serialization matrix: bytes/disk x before/after initialize x listener/inline,
plus replace_listeners and `spacy package`: a saved pipeline needs no biLM files."""
import shutil

import numpy
import pytest
import spacy
from spacy.cli.package import get_third_party_dependencies, package

from spacy_elmo.models.bilm_layer import get_bilm
from spacy_elmo.models.scalar_mix_layer import mix_parameters

from .util import TEXTS, elmo_nlp, listener_config, tagger_config, train, train_examples

INLINE = "inline"
LISTENER = "listener"


def _inline_nlp(weights, *, initialize: bool):
    """A tagger with its own biLM (Tok2VecElmo), no elmo component."""
    nlp = spacy.blank("en")
    tok2vec = {
        "@architectures": "spacy-elmo.Tok2VecElmo.v1",
        "bilm": {
            "@architectures": "spacy-elmo.ElmoBiLM.v1",
            "get_spans": {"@misc": "spacy-elmo.sentence_spans.v1"},
            "weights_loader": {"@misc": "spacy-elmo.original_weights.v1", "path": str(weights)},
        },
        "mixer": {"@architectures": "spacy-elmo.ScalarMix.v1"},
    }
    nlp.add_pipe("tagger", config=tagger_config(tok2vec))
    if initialize:
        nlp.initialize(get_examples=lambda: train_examples(nlp))
    return nlp


def _make(kind, weights, *, initialize):
    if kind == LISTENER:
        return elmo_nlp(weights, initialize=initialize)
    return _inline_nlp(weights, initialize=initialize)


def _roundtrip(nlp, via, tmp_path):
    if via == "disk":
        nlp.to_disk(tmp_path / "pipeline")
        return spacy.load(tmp_path / "pipeline")
    reloaded = spacy.util.load_model_from_config(nlp.config, auto_fill=True)
    return reloaded.from_bytes(nlp.to_bytes())


def _tags(nlp):
    return [[t.tag_ for t in doc] for doc in nlp.pipe(TEXTS)]


def _tagger_mix(nlp):
    tok2vec = nlp.get_pipe("tagger").model.get_ref("tok2vec")
    head = tok2vec.layers[-1] if tok2vec.name == "tok2vec_elmo" else tok2vec.head
    return mix_parameters(head.get_ref("mixer"))


@pytest.mark.parametrize("kind", [LISTENER, INLINE])
@pytest.mark.parametrize("via", ["bytes", "disk"])
def test_roundtrip_before_initialize(weights, tmp_path, kind, via):
    nlp = _make(kind, weights, initialize=False)
    reloaded = _roundtrip(nlp, via, tmp_path)
    assert reloaded.pipe_names == nlp.pipe_names
    reloaded.initialize(get_examples=lambda: train_examples(reloaded))
    train(reloaded, 2)
    assert all(len(tags) == len(doc) for tags, doc in zip(_tags(reloaded), reloaded.pipe(TEXTS)))


@pytest.mark.parametrize("kind", [LISTENER, INLINE])
@pytest.mark.parametrize("via", ["bytes", "disk"])
def test_roundtrip_after_initialize(weights, tmp_path, kind, via):
    nlp = _make(kind, weights, initialize=True)
    train(nlp, 3)
    reloaded = _roundtrip(nlp, via, tmp_path)
    assert _tags(reloaded) == _tags(nlp)
    numpy.testing.assert_array_equal(_tagger_mix(reloaded)[0], _tagger_mix(nlp)[0])
    assert _tagger_mix(reloaded)[1] == _tagger_mix(nlp)[1]
    if kind == LISTENER:
        for a, b in zip(nlp.pipe(TEXTS), reloaded.pipe(TEXTS)):
            numpy.testing.assert_array_equal(a._.elmo.layers, b._.elmo.layers)


def test_loaded_pipeline_needs_no_biLM_files(allennlp_model_dir, tmp_path):
    """The options travel with the model: an uninitialized pipeline built from
    the config gets the biLM's size from the saved bytes."""
    copy = tmp_path / "elmo"
    copy.mkdir()
    for name in ("options.json", "lm_weights.hdf5"):
        shutil.copy(allennlp_model_dir / name, copy / name)
    nlp = elmo_nlp(copy / "lm_weights.hdf5")
    train(nlp, 2)
    nlp.to_disk(tmp_path / "pipeline")
    data = nlp.to_bytes()
    shutil.rmtree(copy)
    loaded = spacy.load(tmp_path / "pipeline")
    assert get_bilm(loaded.get_pipe("elmo").model).options == get_bilm(nlp.get_pipe("elmo").model).options
    assert _tags(loaded) == _tags(nlp)
    from_bytes = spacy.util.load_model_from_config(nlp.config, auto_fill=True).from_bytes(data)
    assert _tags(from_bytes) == _tags(nlp)


def test_spacy_package_ships_the_pipeline(weights, tmp_path):
    nlp = elmo_nlp(weights)
    train(nlp, 2)
    nlp.to_disk(tmp_path / "pipeline")
    assert any(dep.startswith("spacy-elmo") for dep in get_third_party_dependencies(nlp.config))
    (tmp_path / "packages").mkdir()
    package(tmp_path / "pipeline", tmp_path / "packages", name="elmo_test", version="0.0.1",
            create_sdist=False, silent=True)
    package_dir = tmp_path / "packages" / "en_elmo_test-0.0.1"
    meta = spacy.util.load_meta(package_dir / "meta.json")
    assert any(req.startswith("spacy-elmo>=") for req in meta["requirements"])
    data_dir = package_dir / "en_elmo_test" / "en_elmo_test-0.0.1"
    assert _tags(spacy.load(data_dir)) == _tags(nlp)


@pytest.mark.parametrize("frozen", [True, False])
def test_replace_listeners_keeps_the_trained_mix(weights, tmp_path, frozen):
    nlp = elmo_nlp(weights, frozen=frozen)
    train(nlp, 3)
    expected_tags, expected_mix = _tags(nlp), _tagger_mix(nlp)
    nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])
    assert nlp.get_pipe("elmo").listening_components == []
    tok2vec = nlp.get_pipe("tagger").model.get_ref("tok2vec")
    assert tok2vec.name == "tok2vec_elmo" and tok2vec.attrs["frozen"] == frozen
    numpy.testing.assert_array_equal(_tagger_mix(nlp)[0], expected_mix[0])
    assert _tags(nlp) == expected_tags
    config = nlp.config["components"]["tagger"]["model"]["tok2vec"]
    assert config["@architectures"] == "spacy-elmo.Tok2VecElmo.v1"
    assert config["frozen"] == frozen
    assert config["bilm"]["@architectures"] == "spacy-elmo.ElmoBiLM.v1"
    assert config["mixer"]["@architectures"] == "spacy-elmo.ScalarMix.v1"
    # The tagger no longer needs the elmo component, even after a reload.
    nlp.remove_pipe("elmo")
    nlp.to_disk(tmp_path / "pipeline")
    reloaded = spacy.load(tmp_path / "pipeline")
    assert reloaded.pipe_names == ["tagger"]
    assert _tags(reloaded) == expected_tags
    train(reloaded, 1)  # and trains on its own


def test_listener_and_inline_see_the_same_features(weights):
    nlp = elmo_nlp(weights, listener=listener_config(width=20))
    train(nlp, 2)
    doc = nlp("The bank of the river.")
    tok2vec = nlp.get_pipe("tagger").model.get_ref("tok2vec")
    from_listener = tok2vec.predict([doc])[0]
    nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])
    inline = nlp.get_pipe("tagger").model.get_ref("tok2vec")
    # The biLM copy may multiply with other kernels (prepacked or not) than the
    # component's, so the two agree to float32 rounding, not bit for bit.
    numpy.testing.assert_allclose(
        inline.predict([nlp.make_doc(doc.text)])[0], from_listener, rtol=1e-5, atol=1e-6
    )


def test_a_tampered_pipeline_is_refused_before_it_allocates(weights):
    """A filter count of 10**9 in a saved pipeline's options would allocate gigabytes if
    the biLM were built before its sizes were checked, as an options.json's are."""
    import srsly

    from spacy_elmo.errors import OptionsError

    nlp = elmo_nlp(weights)
    data = nlp.get_pipe("elmo").to_bytes()
    msg = srsly.msgpack_loads(data)
    model = srsly.msgpack_loads(msg["model"])
    node_shims = next(shims for shims in model["shims"] if shims)  # the biLM layer's one shim
    shim = srsly.msgpack_loads(node_shims[0])
    inner = srsly.msgpack_loads(shim["state"])
    inner["config"]["char_cnn"]["filters"][0] = [1, 10**9]
    shim["state"] = srsly.msgpack_dumps(inner)
    node_shims[0] = srsly.msgpack_dumps(shim)
    msg["model"] = srsly.msgpack_dumps(model)
    with pytest.raises(OptionsError, match="more than the 400,000,000 spacy-elmo loads"):
        elmo_nlp(weights, initialize=False).get_pipe("elmo").from_bytes(srsly.msgpack_dumps(msg))


def test_load_time_settings_win_over_the_saved_ones(weights, tmp_path, monkeypatch):
    """`precision` and `token_cache_size` given when a saved pipeline is loaded are
    the ones the biLM runs with, and so is a precision set on the loaded component."""
    from spacy_elmo.models.pytorch.bilm import ElmoBiLM
    from spacy_elmo.models.pytorch.lstm import int8_products

    monkeypatch.setattr(int8_products, "int8_available", lambda: True)  # the setting, on any CPU
    seen = []
    forward = ElmoBiLM.forward

    def spy(bilm, char_ids, **settings):
        seen.append({**settings, "precision": bilm.precision})
        return forward(bilm, char_ids, **settings)

    monkeypatch.setattr(ElmoBiLM, "forward", spy)
    elmo_nlp(weights, elmo_config={"token_cache_size": 0, "precision": "fp32"}).to_disk(tmp_path / "pipeline")
    settings = {"precision": "int8", "token_cache_size": 100}
    loaded = spacy.load(tmp_path / "pipeline", config={"components": {"elmo": settings}})
    elmo = loaded.get_pipe("elmo")
    seen.clear()
    for _ in range(2):
        list(loaded.pipe(TEXTS))
    assert elmo.precision == "int8"
    assert {s["precision"] for s in seen} == {"int8"}
    assert all(s["token_cache"] is elmo.token_cache for s in seen) and elmo.token_cache.hits > 0
    elmo.precision = "fp32"
    seen.clear()
    list(loaded.pipe(TEXTS[:1]))
    assert {s["precision"] for s in seen} == {"fp32"}
