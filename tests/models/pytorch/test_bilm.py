"""Batch independence, shapes and edge cases of the biLM."""
import json
import random

import pytest
import torch

from spacy_elmo.models.pytorch.bilm import ElmoBiLM, length_sorted_batches, select_rows
from spacy_elmo.models.pytorch.char_cnn import TokenVectorCache
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.models.pytorch.options import NAMED_SIZES

from ...sync_checks import no_host_sync


@pytest.fixture(scope="module")
def sentences(reference_dir):
    path = reference_dir / "allennlp" / "sentences.json"
    return [s.split() for group in json.loads(path.read_text()) for s in group]


def _encode(bilm, batch):
    with torch.no_grad():
        return bilm(batch_to_char_ids(batch))


def test_sentence_vectors_do_not_depend_on_the_batch(fixture_bilm, sentences):
    alone = [_encode(fixture_bilm, [s]).layers[0, :, : len(s)] for s in sentences]
    rng = random.Random(0)
    for trial in range(4):
        order = list(range(len(sentences)))
        rng.shuffle(order)
        size = rng.randint(2, 12)
        for start in range(0, len(order), size):
            batch_ids = order[start : start + size]
            layers = _encode(fixture_bilm, [sentences[i] for i in batch_ids]).layers
            for row, i in enumerate(batch_ids):
                got = layers[row, :, : len(sentences[i])]
                # float32 rounding: other batch shapes take other GEMM kernels (1e-6 relative)
                assert torch.allclose(got, alone[i], rtol=1e-6, atol=1e-6), (trial, i)


def test_history_does_not_change_outputs(fixture_bilm, sentences):
    first = _encode(fixture_bilm, sentences[:5]).layers
    _encode(fixture_bilm, sentences[5:])
    again = _encode(fixture_bilm, sentences[:5]).layers
    torch.testing.assert_close(first, again, rtol=0, atol=0)


def test_output_layout_and_padding(fixture_bilm):
    batch = [["a", "b", "c"], ["d"], []]
    output = _encode(fixture_bilm, batch)
    assert output.layers.shape == (3, 3, 3, 32)
    assert output.mask.tolist() == [[True] * 3, [True, False, False], [False] * 3]
    assert torch.all(output.layers[1, :, 1:] == 0) and torch.all(output.layers[2] == 0)
    token_layer = output.layers[:, 0]
    torch.testing.assert_close(token_layer[..., :16], token_layer[..., 16:])


def test_empty_batches(fixture_bilm):
    assert _encode(fixture_bilm, []).layers.shape == (0, 3, 0, 32)
    assert _encode(fixture_bilm, [[], []]).layers.shape == (2, 3, 0, 32)


def test_repeated_tokens_share_one_character_encoding(fixture_bilm, monkeypatch):
    seen = []
    encoder_forward = fixture_bilm.char_encoder.forward
    monkeypatch.setattr(
        fixture_bilm.char_encoder, "forward", lambda ids: seen.append(len(ids)) or encoder_forward(ids)
    )
    _encode(fixture_bilm, [["the", "cat", "the"], ["the", "dog"]])
    assert seen == [5]  # <S>, </S>, the, cat, dog


@pytest.mark.parametrize("threads", [1, 2])
def test_first_layer_product_over_distinct_tokens_gives_the_same_vectors(
    fixture_bilm, sentences, monkeypatch, threads
):
    """In prediction, large first-layer weights multiply each distinct token once
    (forced here for the fixture's small ones) and give the chunked product's vectors."""
    from spacy_elmo.models.pytorch.lstm import prediction, stack

    batch = sentences[:12]
    chunked = _encode(fixture_bilm, batch).layers
    monkeypatch.setattr(prediction, "MIN_INPUT_WEIGHTS_FOR_TABLE", 0)
    monkeypatch.setattr(stack, "MIN_STEP_WEIGHTS_FOR_THREADS", 0)
    tables = []
    table_gate_inputs = prediction._table_gate_inputs
    monkeypatch.setattr(
        prediction, "_table_gate_inputs", lambda *args: tables.append(args[5].vectors.shape[0]) or table_gate_inputs(*args)
    )
    before = torch.get_num_threads()
    torch.set_num_threads(threads)  # 2: the directions on two threads
    try:
        table = _encode(fixture_bilm, batch).layers
    finally:
        torch.set_num_threads(before)
    n_distinct = len({token for sentence in batch for token in sentence}) + 2  # <S>, </S>
    assert tables == [n_distinct] * threads
    assert torch.allclose(table, chunked, rtol=1e-6, atol=1e-6)


def test_long_token_and_long_sentence(fixture_bilm):
    long_token = "x" * 10_000
    output = _encode(fixture_bilm, [[long_token, "y"], ["w"] * 2000])
    assert output.layers.shape == (2, 3, 2000, 32)
    truncated = _encode(fixture_bilm, [["x" * 48, "y"]]).layers[0, :, :2]
    torch.testing.assert_close(output.layers[0, :, :2], truncated, rtol=0, atol=1e-6)
    assert torch.isfinite(output.layers).all()


def test_gradients_reach_every_parameter():
    torch.manual_seed(0)
    bilm = ElmoBiLM(NAMED_SIZES["tiny"])
    output = bilm(batch_to_char_ids([["a", "b"], ["c"]]))
    output.layers.sum().backward()
    missing = [name for name, p in bilm.named_parameters() if p.grad is None or not p.grad.any()]
    assert missing == []


def test_gradients_are_the_same_on_every_run():
    """Repeated words send their gradients to one token vector; summed in
    thread order they would differ between identical training runs."""
    torch.manual_seed(0)
    bilm = ElmoBiLM(NAMED_SIZES["tiny"])
    words = [f"w{i}" for i in range(20)]
    rng = random.Random(0)
    char_ids = batch_to_char_ids([[rng.choice(words) for _ in range(60)] for _ in range(64)])
    weights = torch.randn(bilm(char_ids).layers.shape)
    gradients = []
    for _ in range(5):
        bilm.zero_grad()
        (bilm(char_ids).layers * weights).sum().backward()
        gradients.append([p.grad.clone() for p in bilm.parameters()])
    for again in gradients[1:]:
        assert all(torch.equal(a, b) for a, b in zip(gradients[0], again))


@pytest.mark.parametrize("cached", [False, True], ids=["no token cache", "token cache"])
def test_prediction_does_not_synchronise(fixture_bilm, sentences, cached):
    """The host finds what depends on the ids (lengths, packing, distinct tokens, the
    cache's hits) before the copy: the device (meta, a stand-in GPU) is never asked."""
    bilm = fixture_bilm.to("meta")
    cache = TokenVectorCache(40) if cached else None
    with torch.inference_mode(), no_host_sync() as copies_back:
        for start in range(0, len(sentences), 6):
            batch = sentences[start : start + 6]
            output = bilm(bilm.ids_of(batch), token_cache=cache)
            assert output.layers.shape == (len(batch), 3, max(map(len, batch)), 32)
    assert copies_back == []
    assert not cached or cache.hits > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(fixture_bilm, sentences):
    cpu = _encode(fixture_bilm, sentences).layers
    gpu_model = fixture_bilm.to("cuda")
    with torch.no_grad():
        gpu = gpu_model(batch_to_char_ids(sentences)).layers.cpu()
    torch.testing.assert_close(gpu, cpu, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_forked_child_can_encode_after_parent_did(fixture_bilm):
    """The direction thread pool must not be inherited half-dead by a forked child."""
    import multiprocessing

    batch = [["a", "b", "c"], ["d", "e"]]
    expected = _encode(fixture_bilm, batch).layers
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        result = pool.apply_async(_encode_in_child, (fixture_bilm, batch)).get(timeout=60)
    torch.testing.assert_close(result, expected, rtol=0, atol=1e-6)


def _encode_in_child(bilm, batch):
    return _encode(bilm, batch).layers


def test_copies_and_pickles_of_a_used_model_work(fixture_bilm):
    import copy
    import pickle

    batch = [["one", "two", "three", "four", "five"]] * 6
    expected = _encode(fixture_bilm, batch).layers  # fills the prepacked-weight caches
    for clone in (copy.deepcopy(fixture_bilm), pickle.loads(pickle.dumps(fixture_bilm))):
        torch.testing.assert_close(_encode(clone, batch).layers, expected, rtol=0, atol=0)


def test_prepacked_weights_follow_parameter_updates(fixture_bilm):
    batch = [["one", "two", "three", "four", "five"]] * 6
    before = _encode(fixture_bilm, batch).layers
    with torch.no_grad():
        fixture_bilm.lstm.hidden_weights[0].mul_(0.5)
        fixture_bilm.char_encoder.highway_weights[0].mul_(0.5)
    after = _encode(fixture_bilm, batch).layers
    fixture_bilm.lstm._products._prepacked.enabled = False
    fixture_bilm.char_encoder._prepacked.enabled = False
    plain = _encode(fixture_bilm, batch).layers
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, plain, rtol=0, atol=1e-6)


def test_dropout_is_reproducible_with_directions_in_threads():
    bilm = ElmoBiLM(NAMED_SIZES["tiny"]).train()
    bilm.lstm.dropout = 0.3
    char_ids = batch_to_char_ids([["a", "b", "c", "d"], ["e", "f"], ["g"]])
    runs = []
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # training runs the directions on two threads
    try:
        for _ in range(2):
            torch.manual_seed(7)
            runs.append(bilm(char_ids).layers.detach())
    finally:
        torch.set_num_threads(threads)
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)
    bilm.eval()
    assert not torch.allclose(bilm(char_ids).layers, runs[0])


# select_rows: the rows of table[index], with the same gradient on every run.


def test_select_rows_equals_indexing():
    table = torch.randn(7, 3)
    index = torch.tensor([[0, 6, 6], [2, 0, 1]])
    assert torch.equal(select_rows(table, index), table[index])
    assert torch.equal(select_rows(table[:, 0], index), table[:, 0][index])


def test_repeated_rows_get_the_same_gradient_every_run():
    torch.manual_seed(0)
    table = torch.randn(3000, 256, requires_grad=True)
    index = torch.randint(0, 3000, (60000,))
    upstream = torch.randn(60000, 256)
    gradients = []
    for _ in range(5):
        table.grad = None
        (select_rows(table, index) * upstream).sum().backward()
        gradients.append(table.grad.clone())
    assert all(torch.equal(gradients[0], g) for g in gradients[1:])


# Batching by length: every index once, longest first, within both limits.


def test_batches_are_length_sorted_and_bounded():
    sentences = [["w"] * n for n in (3, 9, 1, 4, 4, 7, 2, 12)]
    batches = list(length_sorted_batches(sentences, batch_size=3, max_batch_tokens=20))
    assert sorted(i for batch in batches for i in batch) == list(range(len(sentences)))
    lengths = [len(sentences[i]) for batch in batches for i in batch]
    assert lengths == sorted(lengths, reverse=True)
    for batch in batches:
        assert len(batch) <= 3 and len(batch) * len(sentences[batch[0]]) <= 20
    assert batches[0] == [7]  # 12 tokens: a second sentence would pass 20 padded tokens


@pytest.mark.parametrize("n_sentences", [0, 1])
def test_small_inputs(n_sentences):
    batches = list(length_sorted_batches([["a", "b"]] * n_sentences, batch_size=4, max_batch_tokens=1))
    assert batches == [[0]] * n_sentences  # a sentence longer than the token cap stands alone


def test_precision_is_checked_when_set_and_is_what_the_lstm_runs_with(monkeypatch):
    from spacy_elmo.errors import SettingsError
    from spacy_elmo.models.pytorch.lstm import int8_products

    bilm = ElmoBiLM(NAMED_SIZES["tiny"])
    assert bilm.precision == bilm.lstm.precision == "fp32"
    with pytest.raises(SettingsError, match="precision must be one of 'fp32', 'int8', got 'int4'"):
        bilm.precision = "int4"
    assert bilm.precision == "fp32"
    monkeypatch.setattr(int8_products, "int8_available", lambda: True)
    bilm.precision = "int8"
    assert bilm.lstm.precision == "int8"
