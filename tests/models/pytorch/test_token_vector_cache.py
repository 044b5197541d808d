"""Each word's token vector once: the encoder's vectors (to float32 rounding: a
word cached from another batch went through other matrix kernels), bounded, and
emptied whenever the weights (or the encoder) change."""
import pytest
import torch

from spacy_elmo.models.pytorch.char_cnn import CharacterEncoder
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.models.pytorch.options import NAMED_SIZES
from spacy_elmo.models.pytorch.token_vector_cache import TokenVectorCache


@pytest.fixture()
def encoder():
    torch.manual_seed(0)
    return CharacterEncoder(NAMED_SIZES["fixture"]).eval()


def _ids(words):
    return batch_to_char_ids([words])[0]


def _assert_same(got, want):
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_cached_vectors_are_exactly_the_encoder_s(encoder):
    cache = TokenVectorCache(100)
    with torch.inference_mode():
        first = cache.token_vectors(encoder, _ids(["the", "bank", "river"]))
        mixed = cache.token_vectors(encoder, _ids(["muddy", "bank", "the", "water"]))
        assert torch.equal(first, encoder(_ids(["the", "bank", "river"])))  # all computed here
        _assert_same(mixed, encoder(_ids(["muddy", "bank", "the", "water"])))
    assert (cache.hits, cache.misses) == (2, 5) and len(cache) == 5


def test_the_cache_is_bounded_and_keeps_the_recently_used_words(encoder):
    cache = TokenVectorCache(3)
    with torch.inference_mode():
        cache.token_vectors(encoder, _ids(["a", "b", "c"]))
        cache.token_vectors(encoder, _ids(["a"]))  # "a" is now the most recent
        cache.token_vectors(encoder, _ids(["d", "e"]))  # evicts "b" and "c"
        assert len(cache) == 3
        hits = cache.hits
        cache.token_vectors(encoder, _ids(["a", "d", "e"]))
        assert cache.hits == hits + 3
        got = cache.token_vectors(encoder, _ids(["b", "f", "g", "h", "i"]))  # more new words than room
        assert len(cache) == 3
        _assert_same(got, encoder(_ids(["b", "f", "g", "h", "i"])))


def test_changed_weights_or_another_encoder_empty_the_cache(encoder):
    cache = TokenVectorCache(100)
    words = ["the", "bank"]
    with torch.inference_mode():
        cache.token_vectors(encoder, _ids(words))
    with torch.no_grad():
        encoder.char_embedding.add_(0.5)  # an in-place torch update
    other = CharacterEncoder(NAMED_SIZES["fixture"]).eval()
    with torch.inference_mode():
        assert torch.equal(cache.token_vectors(encoder, _ids(words)), encoder(_ids(words)))
        assert cache.hits == 0
        encoder.weights_changed()  # an update torch cannot see (Thinc's optimizer)
        cache.token_vectors(encoder, _ids(words))
        assert cache.hits == 0
        assert torch.equal(cache.token_vectors(other, _ids(words)), other(_ids(words)))
        assert cache.hits == 0


def test_no_caching_with_gradients_or_when_off(encoder):
    cache = TokenVectorCache(100)
    vectors = cache.token_vectors(encoder, _ids(["a", "b"]))
    assert vectors.requires_grad and len(cache) == 0
    off = TokenVectorCache(0)
    with torch.inference_mode():
        off.token_vectors(encoder, _ids(["a", "b"]))
    assert len(off) == 0
    with pytest.raises(ValueError, match="max_words must be 0"):
        TokenVectorCache(-1)
