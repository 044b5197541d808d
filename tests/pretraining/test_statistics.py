"""Corpus statistics: perplexity and the unigram baseline."""
import math
from collections import Counter

import pytest

from spacy_elmo.pretraining.statistics import perplexity, unigram_perplexity
from spacy_elmo.pretraining.vocab import Vocabulary


def test_unigram_perplexity_by_hand():
    counts = Counter({"a": 3, "b": 1, "rare": 1})
    vocab = Vocabulary.from_counts(counts, max_size=2)  # "rare" is outside: <UNK> has count 1
    # 2 sentences in training: 5 words + 2 sentence ends = 7 predictions
    got = unigram_perplexity(counts, 2, vocab, [["a", "zzz"], ["b"]])
    probabilities = [3 / 7, 1 / 7, 2 / 7, 1 / 7, 2 / 7]  # a, zzz (<UNK>), </S>, b, </S>
    assert got == pytest.approx(math.exp(-sum(map(math.log, probabilities)) / 5))


def test_perplexity_saturates_instead_of_overflowing():
    assert perplexity(2 * math.log(50.0), 2) == pytest.approx(50.0)
    assert perplexity(0.0, 0) == 1.0
    assert perplexity(1e9, 10) == math.inf
