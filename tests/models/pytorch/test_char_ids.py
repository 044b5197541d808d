"""Character ids of tokens and batches (bilm-tf/AllenNLP layout)."""
import torch

from spacy_elmo.models.pytorch.char_ids import (
    BOS_IDS, BOS_TOKEN, BOW_CHAR, EOS_IDS, EOS_TOKEN, EOW_CHAR, MAX_CHARS_PER_TOKEN, PAD_CHAR, batch_to_char_ids,
    byte_rows, distinct_rows, token_char_ids,
)


def test_token_char_ids_are_bow_bytes_eow_then_padding_shifted_by_one():
    ids = token_char_ids("né")
    assert ids[:5] == (BOW_CHAR + 1, ord("n") + 1, 0xC3 + 1, 0xA9 + 1, EOW_CHAR + 1)
    assert set(ids[5:]) == {PAD_CHAR + 1}
    assert len(token_char_ids("x" * 80)) == MAX_CHARS_PER_TOKEN


def test_batch_rows_are_each_tokens_ids_and_padding_is_zero():
    sentences = [["the", "cat", "the"], [], ["a", BOS_TOKEN], ["cat"]]
    ids = batch_to_char_ids(sentences)
    assert ids.shape == (4, 3, MAX_CHARS_PER_TOKEN) and ids.dtype == torch.int64
    for i, sentence in enumerate(sentences):
        for j in range(3):
            expected = token_char_ids(sentence[j]) if j < len(sentence) else (0,) * MAX_CHARS_PER_TOKEN
            assert tuple(ids[i, j].tolist()) == expected


def test_empty_batches():
    assert batch_to_char_ids([]).shape == (0, 0, MAX_CHARS_PER_TOKEN)
    assert batch_to_char_ids([[], []]).shape == (2, 0, MAX_CHARS_PER_TOKEN)


def test_distinct_rows_equal_torch_unique_in_order_and_inverse():
    # Bytes above 0x7f, every id up to PAD_CHAR + 1, boundary rows, repeats: the
    # byte order must sort as the ids' values do.
    words = ["the", "The", "né", "\u00ff\u0100", "a", "ab", "b", "x" * 60, "the", "a", "Zürich", "ab"]
    rows = torch.tensor([token_char_ids(w) for w in words] + [BOS_IDS, EOS_IDS, BOS_IDS], dtype=torch.int64)
    generator = torch.Generator().manual_seed(0)
    random_rows = torch.randint(0, PAD_CHAR + 2, (200, MAX_CHARS_PER_TOKEN), generator=generator)
    # Also ids past int16's range, which the byte sort cannot hold.
    large = rows.clone()
    large[0, 1] = 65536 + int(large[1, 1])
    for ids in (rows, torch.cat([random_rows, random_rows[:50]]), rows[:1], rows.t().contiguous().t(), large):
        distinct, inverse = distinct_rows(ids)
        expected_distinct, expected_inverse = torch.unique(ids, dim=0, return_inverse=True)
        assert torch.equal(distinct, expected_distinct) and distinct.dtype == ids.dtype
        assert torch.equal(inverse, expected_inverse) and inverse.dtype == torch.int64


def test_distinct_rows_of_no_rows():
    distinct, inverse = distinct_rows(torch.zeros((0, MAX_CHARS_PER_TOKEN), dtype=torch.int64))
    assert distinct.shape == (0, MAX_CHARS_PER_TOKEN) and inverse.shape == (0,)


def test_byte_rows_are_each_words_token_char_ids():
    words = ["the", "", "né", BOS_TOKEN, EOS_TOKEN, "x" * 60, "é" * 30, "a\ud800b", "\x00", "<S", "Zürich"]
    rows = byte_rows(words)
    assert rows.shape == (len(words), MAX_CHARS_PER_TOKEN)
    assert [tuple(row) for row in rows.tolist()] == [token_char_ids(w) for w in words]
    assert byte_rows([]).shape == (0, MAX_CHARS_PER_TOKEN)
