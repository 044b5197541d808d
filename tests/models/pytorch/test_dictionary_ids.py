"""ELMoForManyLangs token ids: the word's id, then <eow>, the characters, <bow>, padding, all +1."""
import pytest

from spacy_elmo.errors import WeightsError
from spacy_elmo.models.pytorch.dictionary_ids import (
    BOS, CHARACTER_SPECIALS, EOS, OOV, WORD_SPECIALS, DictionaryIds, checked_entries, from_id_order,
)

CHARACTERS = {c: i for i, c in enumerate(CHARACTER_SPECIALS + tuple("abc"))}
WORDS = {w: i for i, w in enumerate(WORD_SPECIALS + ("ab",))}


def test_a_tokens_row_is_its_word_then_eow_characters_bow_and_padding_shifted_by_one():
    ids = DictionaryIds(CHARACTERS, WORDS, max_chars=6)
    eow, bow, pad, oov = (CHARACTERS[k] + 1 for k in ("<eow>", "<bow>", "<pad>", OOV))
    assert ids.row("ab") == (WORDS["ab"] + 1, eow, CHARACTERS["a"] + 1, CHARACTERS["b"] + 1, bow, pad, pad)
    assert ids.row("zz") == (WORDS[OOV] + 1, eow, oov, oov, bow, pad, pad)  # unknown word and characters
    a, b, c = (CHARACTERS[k] + 1 for k in "abc")
    assert ids.row("abcabc")[1:] == (eow, a, b, c, a, bow)  # cut to max_chars - 2 characters
    wide = DictionaryIds(CHARACTERS, WORDS, max_chars=8)
    assert wide.row(BOS)[1:4] == (eow, CHARACTERS[BOS] + 1, bow)  # a boundary is one character of its name
    assert wide.boundary_rows == (wide.row(BOS), wide.row(EOS)) and ids.pad_id == pad


def test_rows_are_each_words_row_and_no_words_give_one_column_less():
    for words in (WORDS, None):
        ids = DictionaryIds(CHARACTERS, words, max_chars=6)
        tokens = ["ab", "zz", "", "abcabc", BOS]
        rows = ids.rows(tokens)
        assert [tuple(row) for row in rows.tolist()] == [ids.row(t) for t in tokens]
        assert rows.shape == (5, ids.word_columns + 6) and ids.rows([]).shape == (0, ids.word_columns + 6)


def test_entries_are_checked_and_read_back_in_id_order():
    with pytest.raises(WeightsError, match="word.dic, line 3: id 0 is also the id of line 1"):
        checked_entries([(1, BOS, 0), (2, EOS, 1), (3, OOV, 0)], WORD_SPECIALS, "word.dic", "line")
    with pytest.raises(WeightsError, match="word.dic: lacks the entries <oov>"):
        checked_entries([(1, BOS, 0), (2, EOS, 1)], WORD_SPECIALS, "word.dic", "line")
    with pytest.raises(WeightsError, match=r"word.dic, line 3: id 7 is not below the number of entries \(3\)"):
        checked_entries([(1, BOS, 0), (2, EOS, 1), (3, OOV, 7)], WORD_SPECIALS, "word.dic", "line")
    saved = DictionaryIds(CHARACTERS, WORDS, max_chars=6).to_dict()
    assert from_id_order(saved["words"], WORD_SPECIALS, "saved") == WORDS
    with pytest.raises(WeightsError, match="saved: not a list of entries"):
        from_id_order([1, 2], WORD_SPECIALS, "saved")
