"""The character CNN skips windows that lie wholly in padding and gives the
result of the plain convolution over all 50 positions, values and gradients."""
import random

import pytest
import torch
from torch import nn

from spacy_elmo.models.pytorch.char_cnn import CharacterEncoder, TokenVectorCache
from spacy_elmo.models.pytorch.char_ids import PAD_CHAR, batch_to_char_ids
from spacy_elmo.models.pytorch.options import NAMED_SIZES

from ...sync_checks import no_host_sync


def _plain_features(encoder: CharacterEncoder, char_ids: torch.Tensor) -> torch.Tensor:
    """The definition: conv1d over every position, max, bias, activation."""
    chars = nn.functional.embedding(char_ids, encoder.char_embedding).transpose(1, 2)
    pooled = [encoder.activation(conv(chars).amax(dim=2)) for conv in encoder.convolutions]
    return torch.cat(pooled, dim=1)


def _tokens(n: int, seed: int):
    """Words of every length from 1 to 60 bytes (past the 48-byte cut), multi-byte ones too."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyzé€-.,0123456789"
    return ["".join(rng.choice(alphabet) for _ in range(rng.choice([1, 2, 3, 5, 7, 9, 13, 20, 31, 48, 60])))
            for _ in range(n)]


@pytest.fixture(scope="module")
def encoder():
    torch.manual_seed(0)
    return CharacterEncoder(NAMED_SIZES["tiny"])


def test_features_equal_the_plain_convolution(encoder):
    char_ids = batch_to_char_ids([_tokens(300, seed=1)])[0]
    with torch.no_grad():
        torch.testing.assert_close(encoder._filter_features(char_ids), _plain_features(encoder, char_ids), rtol=1e-6, atol=1e-6)


def test_padding_can_be_the_max():
    """A filter that answers padding most strongly: short tokens take the padding response."""
    torch.manual_seed(0)
    encoder = CharacterEncoder(NAMED_SIZES["tiny"])
    with torch.no_grad():
        encoder.char_embedding[PAD_CHAR + 1] = 5.0
    char_ids = batch_to_char_ids([["a", "bb", "a" * 40]])[0]
    with torch.no_grad():
        got = encoder._filter_features(char_ids)
        torch.testing.assert_close(got, _plain_features(encoder, char_ids), rtol=1e-6, atol=1e-6)


def test_gradients_equal_the_plain_convolution(encoder):
    """Against the plain convolution in float64 (in float32 the plain one splits
    a tied max over dozens of padding windows and is itself off by 1e-4)."""
    char_ids = batch_to_char_ids([_tokens(120, seed=2)])[0]
    weights = torch.randn(char_ids.shape[0], encoder.n_filters, generator=torch.Generator().manual_seed(3))
    grads = []
    for features, dtype in ((encoder._filter_features, torch.float32), (lambda ids: _plain_features(encoder, ids), torch.float64)):
        encoder.to(dtype).zero_grad()
        (features(char_ids) * weights.to(dtype)).sum().backward()
        grads.append([p.grad.double().clone() for p in [encoder.char_embedding, *encoder.convolutions.parameters()]])
    encoder.to(torch.float32)
    for trimmed, plain in zip(*grads):
        torch.testing.assert_close(trimmed, plain, rtol=1e-5, atol=2e-5)


def test_a_token_gets_the_same_vector_in_any_group(encoder):
    words = _tokens(64, seed=4)
    with torch.no_grad():
        together = encoder(batch_to_char_ids([words])[0])
        alone = torch.cat([encoder(batch_to_char_ids([[w]])[0]) for w in words])
    torch.testing.assert_close(together, alone, rtol=1e-6, atol=1e-6)


def test_no_tokens(encoder):
    with torch.no_grad():
        assert encoder(torch.zeros((0, 50), dtype=torch.long)).shape == (0, encoder(batch_to_char_ids([["a"]])[0]).shape[1])


# Each word's token vector once: the encoder's vectors (to float32 rounding: a
# word cached from another batch went through other matrix kernels), bounded, and
# emptied whenever the weights (or the encoder) change.


@pytest.fixture()
def eval_encoder():
    torch.manual_seed(0)
    return CharacterEncoder(NAMED_SIZES["tiny"]).eval()


def _ids(words):
    return batch_to_char_ids([words])[0]


def _cached(cache: TokenVectorCache, encoder: CharacterEncoder, char_ids: torch.Tensor) -> torch.Tensor:
    """``encoder(char_ids)`` (distinct rows) through `cache`, as prediction reads it."""
    lookup = cache.lookup(encoder, char_ids.numpy())
    return encoder(char_ids) if lookup is None else cache.vectors(encoder, lookup.to(char_ids.device))


def _assert_same(got, want):
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_cached_vectors_are_exactly_the_encoder_s(eval_encoder):
    cache = TokenVectorCache(100)
    with torch.inference_mode():
        first = _cached(cache, eval_encoder, _ids(["the", "bank", "river"]))
        mixed = _cached(cache, eval_encoder, _ids(["muddy", "bank", "the", "water"]))
        assert torch.equal(first, eval_encoder(_ids(["the", "bank", "river"])))  # all computed here
        _assert_same(mixed, eval_encoder(_ids(["muddy", "bank", "the", "water"])))
    assert (cache.hits, cache.misses) == (2, 5) and len(cache) == 5


def test_the_cache_is_bounded_and_keeps_the_recently_used_words(eval_encoder):
    cache = TokenVectorCache(3)
    with torch.inference_mode():
        _cached(cache, eval_encoder, _ids(["a", "b", "c"]))
        _cached(cache, eval_encoder, _ids(["a"]))  # "a" is now the most recent
        _cached(cache, eval_encoder, _ids(["d", "e"]))  # evicts "b" and "c"
        assert len(cache) == 3
        hits = cache.hits
        _cached(cache, eval_encoder, _ids(["a", "d", "e"]))
        assert cache.hits == hits + 3
        got = _cached(cache, eval_encoder, _ids(["b", "f", "g", "h", "i"]))  # more new words than room
        assert len(cache) == 3
        _assert_same(got, eval_encoder(_ids(["b", "f", "g", "h", "i"])))


def test_changed_weights_or_another_encoder_empty_the_cache(eval_encoder):
    cache = TokenVectorCache(100)
    words = ["the", "bank"]
    with torch.inference_mode():
        _cached(cache, eval_encoder, _ids(words))
    with torch.no_grad():
        eval_encoder.char_embedding.add_(0.5)  # an in-place torch update
    other = CharacterEncoder(NAMED_SIZES["tiny"]).eval()
    with torch.inference_mode():
        assert torch.equal(_cached(cache, eval_encoder, _ids(words)), eval_encoder(_ids(words)))
        assert cache.hits == 0
        eval_encoder.weights_changed()  # an update torch cannot see (Thinc's optimizer)
        _cached(cache, eval_encoder, _ids(words))
        assert cache.hits == 0
        assert torch.equal(_cached(cache, other, _ids(words)), other(_ids(words)))
        assert cache.hits == 0


def test_no_caching_with_gradients_or_when_off(eval_encoder):
    cache = TokenVectorCache(100)
    vectors = _cached(cache, eval_encoder, _ids(["a", "b"]))
    assert vectors.requires_grad and len(cache) == 0
    off = TokenVectorCache(0)
    with torch.inference_mode():
        _cached(off, eval_encoder, _ids(["a", "b"]))
    assert len(off) == 0
    with pytest.raises(ValueError, match="max_words must be 0"):
        TokenVectorCache(-1)


def test_the_cache_finds_words_on_the_host_and_never_asks_the_device(eval_encoder):
    """The keys live on the host: on meta (a stand-in GPU) the vectors are gathered,
    computed and kept without a value coming back."""
    cache, encoder = TokenVectorCache(4), eval_encoder.to("meta")
    with torch.inference_mode(), no_host_sync() as copies_back:
        for words in (["the", "bank"], ["bank", "river", "the"], ["a", "b", "c", "d", "e"]):  # more words than room
            lookup = cache.lookup(encoder, _ids(words).numpy())
            assert cache.vectors(encoder, lookup.to("meta")).shape == (len(words), 16)
    assert copies_back == [] and (cache.hits, cache.misses, len(cache)) == (2, 8, 4)
