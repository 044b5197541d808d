"""Corpus statistics: word counts, coverage, perplexity and the unigram baseline."""
import math
from collections import Counter
from typing import Any, Dict, Iterable, Sequence, Tuple

from .corpus import Sentence
from .vocab import Vocabulary


def perplexity(nll: float, n_tokens: float) -> float:
    """``exp(nll / n_tokens)``, saturating to ``inf`` where a diverged model's loss
    would overflow a float."""
    mean = nll / max(n_tokens, 1.0)
    return math.exp(mean) if mean < 709.0 else math.inf


def language_model_scores(prefix: str, nll_forward: float, nll_backward: float, n_tokens: float) -> Dict[str, float]:
    """``{prefix}loss`` (the mean of both directions' per-token loss) and the
    forward, backward and mean perplexities of summed log-likelihoods."""
    n_tokens = max(n_tokens, 1.0)
    forward, backward = perplexity(nll_forward, n_tokens), perplexity(nll_backward, n_tokens)
    return {
        f"{prefix}loss": (nll_forward + nll_backward) / (2 * n_tokens),
        f"{prefix}perplexity_forward": forward,
        f"{prefix}perplexity_backward": backward,
        f"{prefix}perplexity": (forward + backward) / 2,
    }


def count_corpus(sentences: Iterable[Sentence]) -> Tuple[Counter, int, int]:
    """Word counts, sentences and words of a sentence stream (the vocabulary pass)."""
    counts: Counter = Counter()
    n_sentences = n_words = 0
    for sentence in sentences:
        counts.update(sentence)
        n_sentences += 1
        n_words += len(sentence)
    return counts, n_sentences, n_words


def corpus_stats(counts: Counter, n_sentences: int, n_words: int, vocab: Vocabulary) -> Dict[str, Any]:
    covered = sum(count for word, count in counts.items() if word in vocab)
    return {
        "n_sentences": n_sentences,
        "n_words": n_words,
        "n_tokens": n_words + n_sentences,
        "n_distinct_words": len(counts),
        "vocab_size": len(vocab),
        "oov_rate": 1.0 - covered / max(n_words, 1),
    }


def unigram_perplexity(
    counts: Counter, n_sentences: int, vocab: Vocabulary, sentences: Sequence[Sentence]
) -> float:
    """Held-out perplexity of the training text's unigram model: the baseline to beat.

    Maximum likelihood over the same predictions as the biLM (words and one
    sentence end each; words outside the vocabulary share `<UNK>`'s count);
    a prediction never seen in training counts as seen once.
    """
    total = sum(counts.values()) + n_sentences
    unknown = sum(count for word, count in counts.items() if word not in vocab)
    log_total = math.log(total)
    nll, n = -len(sentences) * (math.log(max(n_sentences, 1)) - log_total), len(sentences)
    for sentence in sentences:
        for word in sentence:
            count = counts.get(word, 0) if word in vocab else unknown
            nll -= math.log(max(count, 1)) - log_total
        n += len(sentence)
    return perplexity(nll, n)
