"""Resumable batch streams: the token budget, exact restore."""
from collections import Counter
from pathlib import Path

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


def test_a_restored_stream_continues_exactly(tmp_path):
    import pickle

    path = write_lines(tmp_path / "a.txt", LINES)
    stream = _stream(path)
    for _ in range(11):
        stream.next_batch()
    state = pickle.loads(pickle.dumps(stream.state_dict()))
    expected = [stream.next_batch() for _ in range(25)]
    restored = _stream(path)
    restored.next_batch()
    restored.load_state_dict(state)
    assert [restored.next_batch() for _ in range(25)] == expected
