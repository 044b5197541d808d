"""How a run reads text: its corpus settings, held-out sentences, and the counted share
of the training text kept tokenized in the run's directory."""
import dataclasses
import json
import re
from collections import Counter

import pytest

from spacy_elmo.errors import TrainingError
from spacy_elmo.pretraining.config import CorpusConfig
from spacy_elmo.pretraining.run_text import TextReading

CORPUS = CorpusConfig(
    train="unused", dev=None, format="auto", text_field="text", tokenizer="whitespace",
    split_sentences=False, max_window=100, shuffle_buffer=4, max_dev_sentences=None,
)
LINES = [f"line {i} has w{i % 3}" for i in range(6)]


@pytest.fixture()
def text_files(tmp_path):
    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for path, lines in zip(files, (LINES[:4], LINES[4:])):
        path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return files


def test_first_sentences_are_the_first_n_in_file_order_or_all_for_none(tmp_path, text_files):
    reading = TextReading(CORPUS, tmp_path / "tokenized")
    everything = [line.split() for line in LINES]
    assert reading.first_sentences(text_files, 5, name="corpus.dev") == everything[:5]
    assert reading.first_sentences(text_files, None, name="corpus.dev") == everything
    assert not (tmp_path / "tokenized").exists()  # held-out text is not kept tokenized


def test_first_sentences_of_an_empty_corpus_name_the_setting_and_the_first_three_files(tmp_path):
    files = [tmp_path / f"{i}.txt" for i in range(4)]
    for path in files:
        path.write_text("\n  \n", encoding="utf8")
    names = re.escape(", ".join(map(str, files[:3])))
    with pytest.raises(TrainingError, match=rf"^corpus.dev: no sentences in {names} \(empty corpus\)$"):
        TextReading(CORPUS, tmp_path / "tokenized").first_sentences(files, 10, name="corpus.dev")


def test_the_reader_reads_with_the_configured_format_and_text_field(tmp_path):
    path = tmp_path / "records.txt"  # not .jsonl: "auto" would read it as text
    path.write_text(json.dumps({"body": "from the body", "text": "not this"}) + "\n", encoding="utf8")
    corpus = dataclasses.replace(CORPUS, format="jsonl", text_field="body")
    assert TextReading(corpus, tmp_path / "tokenized").first_sentences([path], None, name="x") == [["from", "the", "body"]]


def test_count_gives_the_words_sentences_and_words_of_each_process_share(tmp_path, text_files):
    reading = TextReading(CORPUS, tmp_path / "tokenized")
    counts, n_sentences, n_words = reading.count(text_files)
    assert counts == Counter(word for line in LINES for word in line.split())
    assert (n_sentences, n_words) == (6, 24)
    shares = [reading.count(text_files, rank=rank, world_size=2) for rank in (0, 1)]
    assert shares[0][0] + shares[1][0] == counts and shares[0][0] != shares[1][0]
    assert sum(share[1] for share in shares) == 6 and sum(share[2] for share in shares) == 24


def test_counting_keeps_the_training_text_tokenized_in_the_cache_directory(tmp_path, text_files):
    reading = TextReading(CORPUS, tmp_path / "tokenized")
    reading.count(text_files)
    assert sorted(path.name.split(".")[0] for path in (tmp_path / "tokenized").iterdir()) == ["a", "b"]
    assert reading.cache.records(text_files[0], 0) is not None


def test_the_tokenized_files_are_keyed_by_the_corpus_settings(tmp_path, text_files):
    def cache_path(corpus):
        return TextReading(corpus, tmp_path).cache.path(text_files[0])

    assert cache_path(CORPUS) == cache_path(dataclasses.replace(CORPUS, shuffle_buffer=99, train="other"))
    for change in ({"max_window": 3}, {"tokenizer": "en"}, {"format": "text"}, {"text_field": "body"}):
        assert cache_path(dataclasses.replace(CORPUS, **change)) != cache_path(CORPUS), change
