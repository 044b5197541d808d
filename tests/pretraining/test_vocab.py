"""The frequency-sorted vocabulary and its vocab.txt file."""
from collections import Counter

import pytest

from spacy_elmo.errors import InputError
from spacy_elmo.pretraining.vocab import SPECIAL_TOKENS, Vocabulary


def test_most_frequent_words_first_after_the_special_tokens():
    counts = Counter({"the": 10, "cat": 3, "sat": 3, "on": 5, "mat": 1, "</S>": 99})
    vocab = Vocabulary.from_counts(counts, max_size=4)
    assert vocab.words == ["<S>", "</S>", "<UNK>", "the", "on", "cat", "sat"]
    assert (vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2)
    assert vocab.ids(["the", "mat", "sat"]) == [3, 2, 6]
    assert Vocabulary.from_counts(counts, max_size=100, min_count=3).words[3:] == ["the", "on", "cat", "sat"]


def test_round_trip_and_bilm_tf_layout(tmp_path):
    vocab = Vocabulary.from_counts(Counter("a b b c c c".split()), max_size=10)
    path = tmp_path / "vocab.txt"
    vocab.to_disk(path)
    assert path.read_text(encoding="utf8") == "<S>\n</S>\n<UNK>\nc\nb\na\n"
    again = Vocabulary.from_disk(path)
    assert again.words == vocab.words and again.fingerprint() == vocab.fingerprint()


#: Characters `str.splitlines` (and text-mode reading, for "\r") end a line at; "\n" is the only line end of vocab.txt.
LINE_SEPARATORS = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def test_words_with_any_line_separator_but_newline_round_trip(tmp_path):
    words = [f"foo{separator}bar" for separator in LINE_SEPARATORS]
    vocab = Vocabulary.from_counts(Counter(words + ["the", "the"]), max_size=100)
    assert sorted(vocab.words[3:]) == sorted(words + ["the"])
    vocab.to_disk(tmp_path / "vocab.txt")
    again = Vocabulary.from_disk(tmp_path / "vocab.txt")
    assert again.words == vocab.words and again.fingerprint() == vocab.fingerprint()


def test_words_that_cannot_be_a_line_are_left_out_of_the_vocabulary():
    counts = Counter(["foo\nbar", " lead", "trail\r", "\u2028", "", "kept"])
    assert Vocabulary.from_counts(counts, max_size=100).words == [*SPECIAL_TOKENS, "kept"]


def test_a_file_with_windows_line_ends_reads(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"<S>\r\n</S>\r\n<UNK>\r\nthe\r\n")
    assert Vocabulary.from_disk(path).words == [*SPECIAL_TOKENS, "the"]


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "first three lines must be the words <S>, </S>, <UNK>"),
        ("</S>\n<S>\n<UNK>\na\n", "first three lines must be the words"),
        ("<S>\n</S>\n<UNK>\na\nb\na\n", "line 6: the word of line 4 again"),
        ("<S>\n</S>\n<UNK>\n\nb\n", "line 4"),
    ],
)
def test_bad_vocab_files_name_the_line(tmp_path, text, message):
    path = tmp_path / "vocab.txt"
    path.write_text(text, encoding="utf8")
    with pytest.raises(InputError, match=message):
        Vocabulary.from_disk(path)


def test_missing_vocab_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        Vocabulary.from_disk(tmp_path / "nope.txt")
    assert SPECIAL_TOKENS == ("<S>", "</S>", "<UNK>")
