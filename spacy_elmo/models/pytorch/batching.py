"""Batching by length: sentences of similar length share a forward pass, so
batches carry little padding."""
from typing import Iterator, List, Sequence, Sized


def length_sorted_batches(
    sentences: Sequence[Sized], *, batch_size: int, max_batch_tokens: int
) -> Iterator[List[int]]:
    """Indices of ``sentences`` in batches of similar length, longest first.

    A batch holds at most ``batch_size`` sentences and at most
    ``max_batch_tokens`` padded tokens (``n_sentences * longest``); a sentence
    longer than ``max_batch_tokens`` gets a batch of its own.
    """
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]), reverse=True)
    batch: List[int] = []
    for i in order:
        longest = len(sentences[batch[0]]) if batch else len(sentences[i])
        if batch and (len(batch) == batch_size or (len(batch) + 1) * longest > max_batch_tokens):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch
