"""ElmoEmbedder: input order, the same vectors as one encode per sentence, long sentences in spans."""
import warnings

import numpy
import pytest
import torch

from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.models.pytorch.embedder import ElmoEmbedder

from ...sync_checks import no_host_sync

SENTENCES = [s.split() for s in ("a b c d e", "f", "g h", "", "i j k l m n o p", "q r s")]


def test_embed_keeps_input_order_and_matches_one_encode_per_sentence(fixture_bilm):
    embedder = ElmoEmbedder(fixture_bilm, batch_size=2, max_batch_tokens=8, sort_window=2)
    arrays = list(embedder.embed(SENTENCES))
    assert [a.shape[1] for a in arrays] == [len(s) for s in SENTENCES]
    for sentence, array in zip(SENTENCES, arrays):
        with torch.inference_mode():
            alone = fixture_bilm(batch_to_char_ids([sentence])).layers[0].numpy()
        numpy.testing.assert_allclose(array, alone, rtol=0, atol=1e-5)
        assert array.dtype == numpy.float32


def test_a_long_sentence_is_encoded_in_bounded_spans(fixture_bilm):
    """Memory stays bounded on one long line: spans of max_length tokens, each
    encoded as a sentence of its own, joined in order."""
    long = [f"w{i % 37}" for i in range(23)]
    embedder = ElmoEmbedder(fixture_bilm, batch_size=4, max_length=10)
    message = (
        "1 sentence longer than 10 tokens (sentence 2) was cut into spans of 10 (max_length 10); "
        "its vectors differ from an uncut run's"
    )
    with pytest.warns(UserWarning) as caught:
        arrays = list(embedder.embed([["x", "y"], long, []]))
    assert [str(w.message) for w in caught] == [message] and embedder.cut == [2]
    assert [a.shape[1] for a in arrays] == [2, 23, 0]
    for start in (0, 10, 20):
        with torch.inference_mode():
            alone = fixture_bilm(batch_to_char_ids([long[start : start + 10]])).layers[0].numpy()
        numpy.testing.assert_allclose(arrays[1][:, start : start + 10], alone, rtol=0, atol=1e-5)


def test_by_default_a_sentence_over_256_tokens_is_read_whole_without_a_warning(fixture_bilm):
    """As `embed` reads it: a sentence is cut only beyond the memory bound (31,895 tokens of
    the fixture biLM, 7,825 of english-compact), so a 300-token one gets the reference's vectors."""
    words = [f"w{i % 41}" for i in range(300)]
    embedder = ElmoEmbedder(fixture_bilm)
    assert embedder.max_length == 31_895
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (array,) = embedder.embed([words])
    with torch.inference_mode():
        whole = fixture_bilm(batch_to_char_ids([words])).layers[0].numpy()
    numpy.testing.assert_allclose(array, whole, rtol=0, atol=1e-5)
    assert embedder.cut == []


def test_embed_copies_back_only_each_batch_s_layers(fixture_bilm):
    """On meta (a stand-in GPU) nothing waits for the device but the copy of each batch's
    layers to the host, which is what `embed` yields."""
    embedder = ElmoEmbedder(fixture_bilm, batch_size=2, max_batch_tokens=8, sort_window=2, device="meta")
    with no_host_sync() as copies_back:
        arrays = list(embedder.embed(SENTENCES * 2))
    assert [a.shape[1] for a in arrays] == [len(s) for s in SENTENCES * 2]
    assert sum(shape[0] for shape in copies_back) == len(SENTENCES) * 2  # sentences, not spans: none is long
    assert all(shape[1:2] + shape[3:] == (3, 32) for shape in copies_back)
    assert embedder.token_cache.hits > 0
