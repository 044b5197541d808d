"""Resumable batch streams: the token budget, exact restore, drawing in the background."""
from collections import Counter
from pathlib import Path

import pytest

from spacy_elmo.errors import InputError
from spacy_elmo.pretraining.batch_stream import BatchStream
from spacy_elmo.pretraining.corpus import CorpusReader, TextSplitter

from .test_corpus import LINES, write_lines


def _stream(path: Path, **kwargs) -> BatchStream:
    reader = CorpusReader([path], TextSplitter(tokenizer="whitespace", max_window=5), seed=1)
    return BatchStream(reader, tokens_per_batch=20, shuffle_buffer=7, sort_window=3, seed=2, **kwargs)


def test_batches_respect_the_token_budget_and_cover_the_corpus(tmp_path):
    stream = _stream(write_lines(tmp_path / "a.txt", LINES))
    seen = Counter()
    for _ in range(60):
        batch = stream.next_batch()
        assert batch and (len(batch) == 1 or sum(len(s) + 1 for s in batch) <= 20)
        seen.update(" ".join(s) for s in batch)
    windows = Counter(" ".join(w) for line in LINES for w in TextSplitter(max_window=5, tokenizer="whitespace").windows(line.split()))
    assert set(seen) == set(windows)
    assert stream.position.epoch >= 1


@pytest.mark.parametrize("prefetch", [True, False])
def test_a_restored_stream_continues_exactly(tmp_path, prefetch):
    import pickle

    path = write_lines(tmp_path / "a.txt", LINES)
    stream, twin = _stream(path, prefetch=prefetch), _stream(path, prefetch=False)
    for _ in range(11):
        stream.next_batch(), twin.next_batch()
    state = pickle.loads(pickle.dumps(stream.state_dict()))
    expected = [twin.next_batch() for _ in range(25)]
    restored = _stream(path, prefetch=not prefetch)
    restored.next_batch()
    restored.load_state_dict(state)
    assert [restored.next_batch() for _ in range(25)] == expected


def test_drawing_in_the_background_gives_the_same_batches_in_the_same_order(tmp_path):
    path = write_lines(tmp_path / "a.txt", LINES)
    ahead, in_place = _stream(path, prefetch=True), _stream(path, prefetch=False)
    for _ in range(40):
        assert ahead.next_batch() == in_place.next_batch()
        ahead.state_dict()  # puts a finished draw's batches behind the ones not yet taken


def test_loading_a_state_waits_for_the_draw_in_flight(tmp_path):
    import threading

    path = write_lines(tmp_path / "a.txt", LINES)
    twin = _stream(path, prefetch=False)
    for _ in range(11):
        twin.next_batch()
    state = twin.state_dict()
    expected = [twin.next_batch() for _ in range(25)]
    restored = _stream(path, prefetch=True)
    draw, gate, calls = restored._draw_batches, threading.Event(), []

    def late_draw():  # every draw after the first (in place) waits for the gate
        if calls:
            gate.wait()
        calls.append(1)
        return draw()

    restored._draw_batches = late_draw
    restored.next_batch()  # starts the second draw, held at the gate
    threading.Timer(0.2, gate.set).start()
    restored.load_state_dict(state)  # must not return before that draw is done with the old state
    assert [restored.next_batch() for _ in range(25)] == expected


def test_a_background_draw_that_fails_raises_in_the_caller(tmp_path):
    path = write_lines(tmp_path / "a.txt", LINES)
    stream = _stream(path, prefetch=True)
    stream.next_batch()
    path.write_text("")  # the reader meets an empty corpus at its next epoch
    with pytest.raises(InputError, match="empty corpus"):
        for _ in range(200):
            stream.next_batch()
