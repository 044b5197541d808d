"""Character ids of tokens and batches (bilm-tf/AllenNLP layout)."""
import torch

from spacy_elmo.models.pytorch.char_ids import (
    BOS_TOKEN, BOW_CHAR, EOW_CHAR, MAX_CHARS_PER_TOKEN, PAD_CHAR, batch_to_char_ids, token_char_ids,
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
