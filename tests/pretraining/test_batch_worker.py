"""Batches prepared by a worker process: the loop's batches, in its order, resumed exactly."""
import os
import pickle
import signal

import pytest

from spacy_elmo.errors import InputError, TrainingError
from spacy_elmo.models.pytorch.char_ids import BYTE_IDS
from spacy_elmo.pretraining.batch_stream import BatchStream
from spacy_elmo.pretraining.batch_worker import PreparedBatches, forks
from spacy_elmo.pretraining.corpus import CorpusReader, TextSplitter
from spacy_elmo.pretraining.trainer import prepare_step
from spacy_elmo.pretraining.vocab import Vocabulary

from ..models.pytorch.test_host_batch import same
from .test_corpus import LINES, write_lines

pytestmark = pytest.mark.skipif(not forks(), reason="batch workers are forked processes (Linux)")

VOCAB = Vocabulary(["<S>", "</S>", "<UNK>"] + sorted({w for line in LINES for w in line.split()})[:20])


def _stream(path) -> BatchStream:
    reader = CorpusReader([path], TextSplitter(tokenizer="whitespace", max_window=5), seed=1)
    return BatchStream(reader, tokens_per_batch=20, shuffle_buffer=7, sort_window=3, seed=2)


def _batches(path, *, worker: bool) -> PreparedBatches:
    return PreparedBatches(_stream(path), BYTE_IDS, VOCAB, ahead=3, worker=worker)


def test_a_worker_prepares_the_batches_of_the_loop_in_its_order(tmp_path):
    path = write_lines(tmp_path / "a.txt", LINES)
    worker, in_loop, stream = _batches(path, worker=True), _batches(path, worker=False), _stream(path)
    try:
        for _ in range(30):
            step = worker.next_step()
            assert same(step, in_loop.next_step())
            assert same(step, prepare_step(stream.next_batch(), BYTE_IDS, VOCAB))
    finally:
        worker.close()


def test_a_state_taken_while_the_worker_is_ahead_continues_exactly(tmp_path):
    path = write_lines(tmp_path / "a.txt", LINES)
    worker, twin = _batches(path, worker=True), _batches(path, worker=False)
    try:
        for _ in range(11):
            worker.next_step(), twin.next_step()
        state = pickle.loads(pickle.dumps(worker.state_dict()))  # three batches prepared, not taken
        assert state == twin.state_dict() or len(state["pending"]) > len(twin.state_dict()["pending"])
        expected = [twin.next_step() for _ in range(25)]
        assert all(same(worker.next_step(), step) for step in expected[:5])  # the worker goes on as before
    finally:
        worker.close()
    for resumed_by_worker in (True, False):
        restored = _batches(path, worker=resumed_by_worker)
        restored.load_state_dict(state)
        try:
            assert all(same(restored.next_step(), step) for step in expected)
        finally:
            restored.close()


def test_a_corpus_error_in_the_worker_is_raised_by_the_loop(tmp_path):
    path = write_lines(tmp_path / "a.txt", LINES)
    batches = _batches(path, worker=True)
    batches.next_step()
    path.write_text("")  # the reader meets an empty corpus at its next epoch
    try:
        with pytest.raises(InputError, match="empty corpus"):
            for _ in range(200):
                batches.next_step()
    finally:
        batches.close()


def test_a_worker_that_dies_is_named_and_a_closed_one_is_not_used(tmp_path):
    path = write_lines(tmp_path / "a.txt", LINES)
    batches = _batches(path, worker=True)
    batches.next_step()
    os.kill(batches._process.pid, signal.SIGKILL)
    batches._process.join()
    with pytest.raises(TrainingError, match=r"preparing the training batches stopped \(exit code -9\)"):
        for _ in range(10):
            batches.next_step()
    with pytest.raises(RuntimeError, match="closed"):
        batches.next_step()


def test_a_worker_with_large_batches_unread_exits_by_itself_when_closed(tmp_path):
    """Batches still in the pipe (more than it holds) are read away, so the worker is not killed."""
    path = write_lines(tmp_path / "a.txt", [" ".join(f"w{i}x{j}" for j in range(60)) for i in range(400)])
    reader = CorpusReader([path], TextSplitter(tokenizer="whitespace"), seed=1)
    batches = PreparedBatches(BatchStream(reader, tokens_per_batch=4000, seed=2), BYTE_IDS, VOCAB, ahead=4)
    batches.next_step()
    process = batches._process
    while batches._results.empty():  # the worker has sent a batch ahead
        process.join(0.05)
    batches.close()
    assert process.exitcode == 0
