"""Batching by length: every index once, longest first, within both limits."""
import pytest

from spacy_elmo.models.pytorch.batching import length_sorted_batches


def test_batches_are_length_sorted_and_bounded():
    sentences = [["w"] * n for n in (3, 9, 1, 4, 4, 7, 2, 12)]
    batches = list(length_sorted_batches(sentences, batch_size=3, max_batch_tokens=20))
    assert sorted(i for batch in batches for i in batch) == list(range(len(sentences)))
    lengths = [len(sentences[i]) for batch in batches for i in batch]
    assert lengths == sorted(lengths, reverse=True)
    for batch in batches:
        assert len(batch) <= 3 and len(batch) * len(sentences[batch[0]]) <= 20
    assert batches[0] == [7]  # 12 tokens: a second sentence would pass 20 padded tokens


@pytest.mark.parametrize("n_sentences", [0, 1])
def test_small_inputs(n_sentences):
    batches = list(length_sorted_batches([["a", "b"]] * n_sentences, batch_size=4, max_batch_tokens=1))
    assert batches == [[0]] * n_sentences  # a sentence longer than the token cap stands alone
