"""The frozen biLM's per-span layer cache: bounded, and training reads each span once."""
import numpy
import pytest

from spacy_elmo.models.span_cache import SpanCache

from ..pipeline.util import elmo_nlp, train, TRAIN_DATA


def test_the_cache_keeps_copies_up_to_its_bound():
    cache = SpanCache(max_bytes=2 * 3 * 2 * 4 * 4)  # two spans of 2 words, (3, 2, 4) float32
    layers = numpy.ones((3, 2, 4), dtype="f")
    cache.put(["a", "b"], layers)
    layers[:] = 5
    assert cache.get(["a", "b"]).max() == 1.0
    cache.put(["c", "d"], layers)
    cache.put(["e", "f"], layers)  # over the bound: not kept
    assert len(cache) == 2 and cache.get(["e", "f"]) is None
    assert (cache.hits, cache.misses) == (1, 1)
    cache.put(["a", "b"], layers)  # already there: neither replaced nor counted twice
    assert cache.get(["a", "b"]).max() == 1.0 and cache.n_bytes == 2 * layers.nbytes
    cache.clear()
    assert len(cache) == 0 and cache.n_bytes == 0


def test_another_biLM_empties_the_cache():
    cache = SpanCache(max_bytes=1 << 20)
    first, second = object(), object()
    cache.serve(first)
    cache.put(["a"], numpy.ones((3, 1, 4), dtype="f"))
    cache.serve(first)
    assert len(cache) == 1
    cache.serve(second)
    assert len(cache) == 0


@pytest.fixture()
def weights(allennlp_model_dir):
    return allennlp_model_dir / "lm_weights.hdf5"


def test_frozen_training_encodes_each_sentence_once_with_the_same_results(weights, one_torch_thread):
    cached = elmo_nlp(weights)
    uncached = elmo_nlp(weights, elmo_config={"frozen_cache_mb": 0})
    losses = [train(nlp, n_steps=4) for nlp in (cached, uncached)]
    elmo = cached.get_pipe("elmo")
    assert len(elmo.span_cache) == len(TRAIN_DATA)
    assert elmo.span_cache.hits == 3 * len(TRAIN_DATA)
    assert len(uncached.get_pipe("elmo").span_cache) == 0
    assert losses[0]["tagger"] == pytest.approx(losses[1]["tagger"], rel=1e-5)
    assert "span_cache" not in elmo.model.attrs or elmo.model.attrs["span_cache"] is None
    cached.to_bytes()  # the cache is not part of the pipeline


def test_repeated_and_whitespace_sentences_come_back_identical(weights, one_torch_thread):
    nlp = elmo_nlp(weights)
    elmo = nlp.get_pipe("elmo")
    from spacy.training import Example

    texts = ["The  bank of the river .", "The  bank of the river .", "Green eggs ."]
    examples = [Example.from_dict(nlp.make_doc(t), {}) for t in texts]
    for _ in range(2):
        elmo.update(examples)
    assert len(elmo.span_cache) == 2
    expected = elmo.predict([nlp.make_doc(t) for t in texts])
    from spacy_elmo.models.bilm_layer import encode_docs

    cached, _ = encode_docs(elmo.model, [nlp.make_doc(t) for t in texts], is_train=False, span_cache=elmo.span_cache)
    for got, want in zip(cached, expected):
        numpy.testing.assert_allclose(got, want, atol=1e-6, rtol=1e-6)
    assert numpy.all(cached[0][:, 1] == 0)  # the whitespace token gets zeros, cached or not


def test_a_negative_cache_size_is_refused():
    import spacy

    from spacy_elmo.errors import SettingsError

    with pytest.raises(SettingsError, match="frozen_cache_mb must be 0"):
        spacy.blank("en").add_pipe("elmo", config={"frozen_cache_mb": -1})


def test_the_cache_is_dropped_when_the_biLM_is_unfrozen(weights, one_torch_thread):
    nlp = elmo_nlp(weights)
    train(nlp, n_steps=1)
    elmo = nlp.get_pipe("elmo")
    assert len(elmo.span_cache) > 0
    elmo.frozen = False
    assert len(elmo.span_cache) == 0
    train(nlp, n_steps=1)
    assert len(elmo.span_cache) == 0


def test_the_token_cache_gives_the_same_vectors_and_follows_new_weights(weights):
    """`token_cache_size` on the component: the layers without it (to float32
    rounding, as any batch composition), across `nlp.pipe` batches, and after the
    weights are replaced (`from_bytes`)."""
    import spacy
    import torch

    from spacy_elmo.errors import SettingsError

    texts = ["The bank of the river .", "The bank lends money .", "A river bank ."]
    cached, plain = elmo_nlp(weights), elmo_nlp(weights, elmo_config={"token_cache_size": 0})
    for batch_size in (1, 2):  # the second pass reads the words the first cached
        got = [doc._.elmo.layers for doc in cached.pipe(texts, batch_size=batch_size)]
        want = [doc._.elmo.layers for doc in plain.pipe(texts, batch_size=batch_size)]
        for a, b in zip(got, want):
            numpy.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert cached.get_pipe("elmo").token_cache.hits > 0
    assert plain.get_pipe("elmo").token_cache is None

    with torch.no_grad():
        plain.get_pipe("elmo").model.shims[0].module.char_encoder.char_embedding.mul_(1.5)
    cached.get_pipe("elmo").from_bytes(plain.get_pipe("elmo").to_bytes())
    got = [doc._.elmo.layers for doc in cached.pipe(texts, batch_size=2)]
    want = [doc._.elmo.layers for doc in plain.pipe(texts, batch_size=2)]
    for a, b in zip(got, want):
        numpy.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    with pytest.raises(SettingsError, match="token_cache_size must be 0"):
        spacy.blank("en").add_pipe("elmo", config={"token_cache_size": -1})
