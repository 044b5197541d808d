"""The character CNN's groups of tokens by length, found on the host."""
import numpy
import torch

from spacy_elmo.models.pytorch.char_ids import PAD_CHAR, byte_rows
from spacy_elmo.models.pytorch.token_groups import GROUP_MAX_CHARS, GroupedTokens


def test_tokens_are_grouped_by_length_in_a_stable_order():
    words = ["antidisestablishment", "a", "bb", "a" * 10, "cc", "x" * 30, "abcdefghij"]
    ids = byte_rows(words)
    groups = GroupedTokens.of(ids, pad_id=PAD_CHAR + 1, word_columns=0)
    n_chars = [len(w) + 2 for w in words]  # with <bow> and <eow>
    order = groups.order.tolist()
    assert [n_chars[i] for i in order] == sorted(n_chars) and order == sorted(range(7), key=n_chars.__getitem__)
    assert numpy.array_equal(numpy.array(order)[groups.restore.numpy()], numpy.arange(7))
    start = 0
    for end, longest in zip(groups.ends, groups.longest):
        members = [n_chars[i] for i in order[start:end]]
        assert longest == max(members)
        assert any(longest <= bound for bound in GROUP_MAX_CHARS) or longest > GROUP_MAX_CHARS[-1]
        start = end
    assert groups.ends[-1] == 7 and groups.ids.dtype == torch.int16


def test_tokens_already_in_order_keep_no_order_and_widen_to_int32_on_a_device():
    groups = GroupedTokens.of(byte_rows(["a", "bb", "ccc"]), pad_id=PAD_CHAR + 1, word_columns=0)
    assert groups.order is None and groups.restore is None and groups.ends == (3,) and groups.longest == (5,)
    assert groups.to("cpu").ids.dtype == torch.int32 and len(groups) == 3
