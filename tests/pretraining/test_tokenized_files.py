"""The token cache: a corpus file is tokenized once, then streamed from its cache."""
import os
from pathlib import Path

import pytest

from spacy_elmo.pretraining.corpus import CorpusReader, StreamPosition, TextSplitter
from spacy_elmo.pretraining.run import pretrain
from spacy_elmo.pretraining.tokenized_files import TokenizedFiles

from .util import fast_config

LINES = ["", *[f"Line {i}: it has words, w{i}; and x{i % 3}." for i in range(30)], "   ", "The end."]


class CountingSplitter(TextSplitter):
    calls = 0

    def __call__(self, record):
        CountingSplitter.calls += 1
        return super().__call__(record)


def _reader(path: Path, cache, **kwargs) -> CorpusReader:
    return CorpusReader([path], CountingSplitter(tokenizer="en", max_window=6), cache=cache, **kwargs)


@pytest.fixture()
def text(tmp_path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf8")
    return path


def test_a_whole_pass_writes_the_cache_and_later_passes_read_it(tmp_path, text):
    cache = TokenizedFiles(tmp_path / "cache", "settings")
    CountingSplitter.calls = 0
    first = list(_reader(text, cache).sentences())
    assert CountingSplitter.calls == 31  # non-blank lines
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".jsonl"]
    second = list(_reader(text, cache).sentences())
    assert CountingSplitter.calls == 31  # nothing tokenized again
    assert second == first == list(_reader(text, None).sentences())


def test_positions_and_resumed_reads_are_the_same_with_and_without_the_cache(tmp_path, text):
    cache = TokenizedFiles(tmp_path / "cache", "settings")
    list(_reader(text, cache).sentences())
    with_cache, without = _reader(text, cache).records(StreamPosition()), _reader(text, None).records(StreamPosition())
    for _ in range(45):  # into the second epoch
        assert next(with_cache) == next(without)
    middle = StreamPosition(**vars(next(without)[1]))
    assert list(_take(_reader(text, cache).records(middle), 20)) == list(_take(_reader(text, None).records(middle), 20))


def _take(iterator, n):
    for _ in range(n):
        yield next(iterator)


def test_a_partial_pass_or_a_changed_file_leaves_no_cache_in_use(tmp_path, text):
    cache = TokenizedFiles(tmp_path / "cache", "settings")
    records = _reader(text, cache).records(StreamPosition())
    for _ in range(5):
        next(records)
    records.close()  # stopped halfway: no cache, no temporary file
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []
    list(_reader(text, cache).sentences())
    text.write_text("Only one line now.\n", encoding="utf8")
    os.utime(text, ns=(1, 1))
    assert list(_reader(text, cache).sentences()) == [["Only", "one", "line", "now", "."]]
    other_settings = TokenizedFiles(tmp_path / "cache", "other settings")
    assert other_settings.records(text, 0) is None


def test_pretraining_tokenizes_its_corpus_once(tmp_path, tiny_text, monkeypatch):
    from spacy_elmo.pretraining import corpus

    calls = {"n": 0}
    original = corpus.TextSplitter.__call__

    def counting(self, record):
        calls["n"] += 1
        return original(self, record)

    monkeypatch.setattr(corpus.TextSplitter, "__call__", counting)
    config = fast_config(tiny_text, training__max_steps=30)  # several epochs of the 4-line corpus
    pretrain(config, tmp_path / "out")
    assert calls["n"] == 5  # its 5 lines, in the vocabulary pass; every epoch of training reads the cache
    assert len(list((tmp_path / "out" / "tokenized").glob("*.jsonl"))) == 1
