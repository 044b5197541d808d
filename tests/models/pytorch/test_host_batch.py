"""The host's batch: made from the sentences' distinct words, it is the batch made from their ids."""
import dataclasses

import numpy
import torch

from spacy_elmo.models.pytorch.char_ids import BOS_TOKEN, BYTE_IDS
from spacy_elmo.models.pytorch.elmoformanylangs_format import BOS, CHARACTER_SPECIALS, EOS, OOV, DictionaryIds
from spacy_elmo.models.pytorch.char_ids import BatchWords
from spacy_elmo.models.pytorch.host_batch import HostBatch

SENTENCES = [["the", "cat", "the"], [], ["a", BOS_TOKEN, "x" * 60, "x" * 61], ["cat"], ["Zürich", "né", "the"]]
WITH_WORDS = DictionaryIds(
    {c: i for i, c in enumerate(CHARACTER_SPECIALS + tuple("acehtx"))}, {w: i for i, w in enumerate((BOS, EOS, OOV, "the"))}, 8
)


def same(a, b) -> bool:
    """Whether two batches (dataclasses of tensors) are equal, dtypes included."""
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and torch.equal(a, b)
    return a == b


def test_batch_words_are_the_distinct_words_and_each_tokens_place():
    words = BatchWords.of(SENTENCES)
    assert words.words == ["the", "cat", "a", BOS_TOKEN, "x" * 60, "x" * 61, "Zürich", "né"]
    assert [words.words[i] for i in words.places] == [t for s in SENTENCES for t in s]
    assert words.lengths.tolist() == [3, 0, 4, 1, 3]
    for sentences, places in (([], []), ([[]], []), ([[], ["a"]], [0])):  # no token, one token
        assert BatchWords.of(sentences).places.tolist() == places


def test_a_batch_of_words_is_the_batch_of_their_ids():
    """Also where two words have one row of ids (60 and 61 x's cut to 48 bytes; `<S>` is the
    boundary's row; unknown characters and words with a dictionary)."""
    for token_ids in (BYTE_IDS, WITH_WORDS):
        for sentences in (SENTENCES, SENTENCES[:1], [[]], [["cat"]] * 3):
            expected = HostBatch.of(token_ids.batch(sentences), token_ids)
            assert same(HostBatch.of_words(BatchWords.of(sentences), token_ids), expected)


def test_output_places_point_each_token_at_its_packed_rows():
    batch = HostBatch.of_words(BatchWords.of(SENTENCES), BYTE_IDS)
    rows, positions, places = batch.rows.numpy(), batch.positions.numpy(), batch.output_index.numpy()
    n_rows = len(rows)
    for direction in (0, 1):
        for sentence, length in enumerate(len(s) for s in SENTENCES):
            for token in range(places.shape[2]):
                k = places[direction, sentence, token]
                if token >= length:
                    assert k == n_rows
                else:
                    assert rows[k] == sentence and positions[direction, k] == token + 1
    assert numpy.isin(numpy.arange(n_rows), places).sum() < n_rows  # boundary rows land nowhere
