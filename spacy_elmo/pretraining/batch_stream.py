"""Endless training batches from a corpus reader, checkpointed and resumed exactly:
a shuffle buffer, then length-sorted batches of about `tokens_per_step` tokens."""
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy

from .corpus import CorpusReader, StreamPosition
from .tokenized_files import Sentence


class BatchStream:
    """Endless training batches from a reader: shuffle buffer, then length-sorted batches.

    Batches are drawn `sort_window` at a time. With `prefetch`, the next draw
    runs on a background thread while the caller trains on the current ones
    (a draw of 32 GPU-sized batches reads and shuffles about 80,000 sentences:
    seconds of Python that would otherwise stall the GPU); the batches are the
    same either way, in the same order. `position` then runs one draw ahead of
    the batches taken, and a saved state holds up to two draws' batches.

    :param tokens_per_batch: budget per batch, counting each sentence as its
        words plus one end of sentence (the predictions per direction).
    :param shuffle_buffer: sentences held for shuffling.
    :param sort_window: batches' worth of sentences drawn together and sorted by
        length, so a batch holds similar lengths (fewer LSTM steps).
    :param prefetch: draw the next batches on a background thread.
    """

    def __init__(
        self, reader: CorpusReader, *, tokens_per_batch: int, shuffle_buffer: int = 20000,
        sort_window: int = 32, seed: int = 0, prefetch: bool = True,
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
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batches") if prefetch else None
        self._next_draw: Optional["Future[List[List[Sentence]]]"] = None

    def next_batch(self) -> List[Sentence]:
        if not self.pending:
            self.pending = self._take_next_draw()
        batch = self.pending.pop()
        if self._executor is not None and self._next_draw is None:
            self._next_draw = self._executor.submit(self._draw_batches)
        return batch

    def state_dict(self) -> Dict[str, Any]:
        """Everything the next batches depend on; waits for a draw in flight and keeps its batches as pending."""
        if self._next_draw is not None:  # its batches come after the current ones, which pop from the end
            self.pending = self._take_next_draw() + self.pending
        return {
            "position": asdict(self.position),
            "buffer": [list(s) for s in self.buffer],
            "pending": [[list(s) for s in batch] for batch in self.pending],
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from `state` (from :meth:`state_dict`); a draw in flight is waited for and dropped."""
        self._drop_next_draw()
        self.position = StreamPosition(**state["position"])
        self.buffer = [list(s) for s in state["buffer"]]
        self.pending = [[list(s) for s in batch] for batch in state["pending"]]
        self.rng.bit_generator.state = state["rng"]
        self._records = None

    def close(self) -> None:
        """Wait for a draw in flight and stop the background thread (a stream still works after, in place)."""
        self._drop_next_draw()
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

    def _drop_next_draw(self) -> None:
        if self._next_draw is not None:
            self._next_draw.exception()  # wait: the draw changes the buffer, the position and the generator
            self._next_draw = None

    def _take_next_draw(self) -> List[List[Sentence]]:
        """The draw running in the background (its error, if it failed), or one drawn now."""
        if self._next_draw is None:
            return self._draw_batches()
        draw, self._next_draw = self._next_draw, None
        return draw.result()

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
