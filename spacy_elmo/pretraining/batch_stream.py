"""Endless training batches from a corpus reader, checkpointed and resumed exactly:
a shuffle buffer, then length-sorted batches of about `tokens_per_step` tokens."""
from dataclasses import asdict
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy

from .corpus import CorpusReader, StreamPosition
from .tokenized_files import Sentence


class BatchStream:
    """Endless training batches from a reader: shuffle buffer, then length-sorted batches.

    `tokens_per_batch` counts each sentence as its words plus one end of sentence (the predictions per direction).
    `sort_window` batches' worth are drawn and sorted by length together (similar lengths: fewer LSTM steps); 32
    GPU-sized batches read and shuffle about 80,000 sentences (:mod:`.batch_worker` does it off the loop)."""

    def __init__(
        self, reader: CorpusReader, *, tokens_per_batch: int, shuffle_buffer: int = 20000,
        sort_window: int = 32, seed: Any = 0,
    ) -> None:
        self.reader = reader
        self.tokens_per_batch = tokens_per_batch
        self.shuffle_buffer = shuffle_buffer
        self.sort_window = sort_window
        self.position = StreamPosition()
        self.buffer: List[Sentence] = []
        self.pending: List[List[Sentence]] = []  # drawn, not yet taken; the next batch is last
        self.rng = numpy.random.default_rng(seed)
        self._records: Optional[Iterator[Tuple[List[Sentence], StreamPosition]]] = None

    def next_batch(self) -> List[Sentence]:
        if not self.pending:
            self.pending = self._draw_batches()
        return self.pending.pop()

    def state_dict(self) -> Dict[str, Any]:
        """Everything the next batches depend on."""
        return {
            "position": asdict(self.position),
            "buffer": [list(s) for s in self.buffer],
            "pending": [[list(s) for s in batch] for batch in self.pending],
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from `state` (from :meth:`state_dict`)."""
        self.position = StreamPosition(**state["position"])
        self.buffer = [list(s) for s in state["buffer"]]
        self.pending = [[list(s) for s in batch] for batch in state["pending"]]
        self.rng.bit_generator.state = state["rng"]
        self._records = None

    def _fill(self) -> None:
        if self._records is None:
            self._records = self.reader.records(self.position)
        while len(self.buffer) < self.shuffle_buffer:
            sentences, self.position = next(self._records)
            self.buffer.extend(sentences)

    def _draw(self) -> Sentence:
        self._fill()
        i = int(self.rng.integers(len(self.buffer)))
        self.buffer[i], self.buffer[-1] = self.buffer[-1], self.buffer[i]
        return self.buffer.pop()

    def _draw_batches(self) -> List[List[Sentence]]:
        """`sort_window` batches' worth of sentences, sorted by length, cut into batches, in random order."""
        drawn: List[Sentence] = []
        budget = self.sort_window * self.tokens_per_batch
        total = 0
        while total < budget:
            sentence = self._draw()
            drawn.append(sentence)
            total += len(sentence) + 1
        drawn.sort(key=len)
        batches = list(batches_by_tokens(drawn, self.tokens_per_batch))
        return [batches[i] for i in self.rng.permutation(len(batches))]


def batches_by_tokens(sentences: Sequence[Sentence], tokens_per_batch: int) -> Iterator[List[Sentence]]:
    """Consecutive batches of at most `tokens_per_batch` tokens (at least one sentence each)."""
    batch: List[Sentence] = []
    tokens = 0
    for sentence in sentences:
        if batch and tokens + len(sentence) + 1 > tokens_per_batch:
            yield batch
            batch, tokens = [], 0
        batch.append(sentence)
        tokens += len(sentence) + 1
    if batch:
        yield batch
