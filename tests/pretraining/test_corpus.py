"""Corpus reading: formats, tokenization, windows, sharding."""
import json
from collections import Counter
from pathlib import Path

import pytest

from spacy_elmo.errors import InputError
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.pretraining.corpus import (
    MAX_TOKEN_CHARS, CorpusReader, StreamPosition, TextSplitter, corpus_root, read_records,
    resolve_corpus_files,
)
from spacy_elmo.errors import ConfigError

LINES = [f"line {i} has words w{i} and x{i % 3}" for i in range(40)]


def write_lines(path: Path, lines) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf8")
    return path


def test_text_jsonl_and_spacy_files_give_the_same_sentences(tmp_path):
    import spacy
    from spacy.tokens import DocBin

    texts = ["Hello, world!", "It's a test."]
    text_file = write_lines(tmp_path / "a.txt", [texts[0], "", "   ", texts[1]])
    jsonl_file = write_lines(tmp_path / "a.jsonl", [json.dumps({"text": t, "id": i}) for i, t in enumerate(texts)])
    nlp = spacy.blank("en")
    docbin = DocBin(docs=[nlp(t) for t in texts])
    docbin.to_disk(tmp_path / "a.spacy")
    expected = [["Hello", ",", "world", "!"], ["It", "'s", "a", "test", "."]]
    splitter = TextSplitter(tokenizer="en")
    for path in (text_file, jsonl_file, tmp_path / "a.spacy"):
        assert list(CorpusReader([path], splitter).sentences()) == expected, path
    assert list(CorpusReader([text_file], TextSplitter(tokenizer="whitespace")).sentences()) == [
        ["Hello,", "world!"], ["It's", "a", "test."]
    ]


def test_sentence_splitting_and_windows():
    splitter = TextSplitter(tokenizer="en", split_sentences=True, max_window=4)
    sentences = splitter("This is one. And this is the second sentence here.")
    assert sentences == [
        ["This", "is", "one", "."], ["And", "this", "is", "the"], ["second", "sentence", "here", "."]
    ]
    windows = TextSplitter(tokenizer="whitespace", max_window=10).windows([str(i) for i in range(25)])
    assert [len(w) for w in windows] == [8, 9, 8]
    assert sum(windows, []) == [str(i) for i in range(25)]
    with pytest.raises(ConfigError, match="corpus.tokenizer"):
        TextSplitter(tokenizer="not-a-language")


def test_corpus_paths(tmp_path):
    with pytest.raises(InputError, match=r"corpus.train: corpus path not found: .*missing.txt"):
        resolve_corpus_files(tmp_path / "missing.txt", setting="corpus.train")
    (tmp_path / "dir").mkdir()
    with pytest.raises(InputError, match="holds no files"):
        resolve_corpus_files(tmp_path / "dir", setting="corpus.train")
    with pytest.raises(InputError, match="no file matches"):
        resolve_corpus_files(str(tmp_path / "*.txt"), setting="corpus.dev")
    for name in ("b.txt", "a.txt", ".hidden.txt"):
        write_lines(tmp_path / "dir" / name, ["x"])
    assert [p.name for p in resolve_corpus_files(tmp_path / "dir", setting="s")] == ["a.txt", "b.txt"]
    assert [p.name for p in resolve_corpus_files(str(tmp_path / "dir" / "a*"), setting="s")] == ["a.txt"]


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("bad.jsonl", b'{"text": "ok"}\n{"text": \n', r"bad.jsonl:2: invalid JSON"),
        ("bad.jsonl", b'{"text": "ok"}\n\n{"body": "x"}\n', r"bad.jsonl:3: expected a JSON object with a string field 'text'"),
        ("bad.txt", b"fine\nbad \xff byte\n", r"bad.txt:2: not UTF-8"),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(InputError, match=message):
        list(CorpusReader([tmp_path / name], TextSplitter(tokenizer="whitespace")).sentences())


def test_reading_resumes_mid_file(tmp_path):
    path = write_lines(tmp_path / "a.txt", LINES[:5])
    records = list(read_records(path, "text"))
    _, start, line = records[2]
    assert [r[0] for r in read_records(path, "text", start=start, line=line)] == [r[0] for r in records[3:]]
    assert [r[2] for r in records] == [1, 2, 3, 4, 5]


def test_empty_corpus(tmp_path):
    path = write_lines(tmp_path / "empty.txt", ["", "  "])
    reader = CorpusReader([path], TextSplitter(tokenizer="whitespace"), name="corpus.train")
    with pytest.raises(InputError, match=r"corpus.train: no sentences in .*empty.txt \(empty corpus\)"):
        next(reader.records(StreamPosition()))


@pytest.mark.parametrize("n_files", [1, 3])
def test_processes_read_disjoint_shares_that_cover_the_corpus(tmp_path, n_files):
    files = [write_lines(tmp_path / f"{i}.txt", LINES[i::n_files]) for i in range(n_files)]
    splitter = TextSplitter(tokenizer="whitespace")
    for epoch in (0, 1):
        shares = []
        for rank in (0, 1):
            reader = CorpusReader(files, splitter, rank=rank, world_size=2, seed=3)
            records = reader.records(StreamPosition(epoch=epoch))
            share = []
            for sentences, position in records:
                if position.epoch != epoch:
                    break
                share.extend(" ".join(s) for s in sentences)
            shares.append(share)
        assert shares[0] and shares[1] and not set(shares[0]) & set(shares[1])
        assert Counter(shares[0] + shares[1]) == Counter(LINES)


def test_a_record_over_a_million_characters_is_read():
    """spaCy's E088 guard (1,000,000 characters) is for parsers; the tokenizer reads it."""
    words = ("word " * 240_000).strip()  # 1.2M characters
    sentences = TextSplitter(tokenizer="en", split_sentences=True, max_window=100)(words)
    assert sum(len(s) for s in sentences) == 240_000


@pytest.mark.parametrize("tokenizer", ["whitespace", "en"])
def test_over_long_tokens_are_cut_as_the_character_encoder_cuts_them(tokenizer):
    """The encoder reads a token's first 48 UTF-8 bytes: cut to 48 characters, a token gives the same ids."""
    long_ascii, long_wide = "x" * 100_000, "ü" * 60
    sentences = TextSplitter(tokenizer=tokenizer)(f"a {long_ascii} b {long_wide}")
    assert sentences == [["a", "x" * MAX_TOKEN_CHARS, "b", "ü" * MAX_TOKEN_CHARS]]
    assert batch_to_char_ids(sentences).tolist() == batch_to_char_ids([["a", long_ascii, "b", long_wide]]).tolist()


def test_a_glob_reads_from_its_directory_before_the_first_wildcard(tmp_path):
    (tmp_path / "data").mkdir()
    assert corpus_root(str(tmp_path / "data" / "**" / "*.txt")) == tmp_path / "data"
    assert corpus_root(str(tmp_path / "data")) == tmp_path / "data"
    assert corpus_root("*.txt") == Path(".")
