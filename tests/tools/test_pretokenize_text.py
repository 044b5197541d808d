"""tools/pretokenize_text.py: the sentences a run with spaCy's tokenizer reads, one per line."""
from pathlib import Path

import pytest

from spacy_elmo.pretraining.corpus import TextSplitter

from ..project.conftest import load_script

pretokenize_text = load_script("pretokenize_text", folder="tools")


def test_a_whitespace_run_reads_the_sentences_of_an_english_run(tmp_path: Path):
    source = tmp_path / "text.txt"
    source.write_text("Dr. Smith isn't here. He left at 5 p.m.!\n\n" + "Word " * 150 + "end.\n", encoding="utf8")
    words = pretokenize_text.pretokenize(source, tmp_path / "out.txt")
    english = TextSplitter(tokenizer="en", split_sentences=True, max_window=100)
    expected = [s for line in source.read_text(encoding="utf8").splitlines() if line for s in english(line)]
    whitespace = TextSplitter(tokenizer="whitespace", max_window=100)
    lines = (tmp_path / "out.txt").read_text(encoding="utf8").splitlines()
    assert [s for line in lines for s in whitespace(line)] == expected
    assert words == sum(len(s) for s in expected)
    assert len(expected) == 4 and all(len(s) <= 100 for s in expected)


def test_max_words_stops_after_the_line_that_reaches_it(tmp_path: Path):
    source = tmp_path / "text.txt"
    source.write_text("one two three.\nfour five.\nsix.\n", encoding="utf8")
    assert pretokenize_text.pretokenize(source, tmp_path / "out.txt", max_words=5) == 7
    assert (tmp_path / "out.txt").read_text(encoding="utf8") == "one two three .\nfour five .\n"


def test_non_text_input_is_refused_in_one_line(tmp_path: Path):
    source = tmp_path / "docs.jsonl"
    source.write_text('{"text": "Hello."}\n', encoding="utf8")
    with pytest.raises(pretokenize_text.InputError, match="plain text only"):
        pretokenize_text.pretokenize(source, tmp_path / "out.txt")
    assert list(tmp_path.iterdir()) == [source]
