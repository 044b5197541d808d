"""The prediction path against the reference cell, values to 1e-6 in float32: batched,
each direction on its own thread (prepacked products), the first layer over distinct
tokens, from an initial state, with clips that bite."""
import dataclasses

import pytest
import torch

from spacy_elmo.models.pytorch.lstm import BiLstmStack, DistinctInputs, PackingPlan, prediction, stack as stack_module
from spacy_elmo.models.pytorch.options import NAMED_SIZES


def _stack(*, hidden=24, proj=8, cell_clip=0.5, proj_clip=0.4):
    options = dataclasses.replace(
        NAMED_SIZES["tiny"], lstm_dim=hidden, projection_dim=proj, n_layers=2,
        use_skip_connections=True, cell_clip=cell_clip, proj_clip=proj_clip,
    )
    torch.manual_seed(0)
    stack = BiLstmStack(options).eval()
    with torch.no_grad():
        for bias in stack.biases:
            bias.normal_(0.0, 0.5)
    return stack


def _batch(stack, lengths=(9, 7, 7, 5, 4, 4, 2, 1), n_distinct=6):
    """Packed inputs drawn from a table of `n_distinct` token vectors, as the biLM makes them."""
    plan = PackingPlan.from_sorted_lengths(sorted(lengths, reverse=True))
    generator = torch.Generator().manual_seed(1)
    vectors = torch.randn(n_distinct, stack.input_weights[0].shape[1], generator=generator) * 2
    index = torch.randint(0, n_distinct, (2, plan.n_rows), generator=generator)
    return vectors[index], plan, DistinctInputs(vectors, index)


@pytest.fixture()
def directions_on_threads(monkeypatch):
    """Two torch threads and the threads' rule lowered: each direction on its own thread."""
    monkeypatch.setattr(stack_module, "MIN_STEP_WEIGHTS_FOR_THREADS", 0)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


def _assert_matches_reference(stack, inputs, plan, distinct=None, state=None):
    with torch.no_grad():
        assert stack.choose_path(inputs) == "prediction"
        got_outputs, got_states = stack(inputs, plan, state, distinct)
        want_outputs, want_states = stack(inputs, plan, state, path="reference")
    for got, want in zip(got_outputs + [t for s in got_states for t in s],
                         want_outputs + [t for s in want_states for t in s]):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    return got_outputs


def test_batched_directions_match_the_reference(one_torch_thread):
    stack = _stack()
    inputs, plan, _ = _batch(stack)
    outputs = _assert_matches_reference(stack, inputs, plan)
    assert (outputs[0].abs() == 0.4).any()  # the projection clip bites


def test_directions_on_threads_with_prepacked_products_match_the_reference(directions_on_threads):
    stack = _stack()
    inputs, plan, _ = _batch(stack)
    assert stack._directions_in_threads(inputs)
    _assert_matches_reference(stack, inputs, plan)
    assert stack._products._prepacked._packed or not stack._products._prepacked.enabled


@pytest.mark.parametrize("threads", [1, 2])
def test_first_layer_over_distinct_tokens_matches_the_reference(monkeypatch, threads):
    monkeypatch.setattr(prediction, "MIN_INPUT_WEIGHTS_FOR_TABLE", 0)
    monkeypatch.setattr(stack_module, "MIN_STEP_WEIGHTS_FOR_THREADS", 0)  # with 2 threads: on threads
    stack = _stack()
    inputs, plan, distinct = _batch(stack)
    rows = []
    products = stack._products.__class__.__call__

    def spy(self, add, x, weight, key, precision):
        if key[0] == 0 and key[-1] == "input":
            rows.append(x.shape[1])
        return products(self, add, x, weight, key, precision)

    monkeypatch.setattr(stack._products.__class__, "__call__", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _assert_matches_reference(stack, inputs, plan, distinct)
    finally:
        torch.set_num_threads(before)
    assert rows == [6] * threads  # one product over the 6 distinct vectors per call


def test_the_table_only_for_large_weights_and_repeated_tokens():
    stack = _stack()
    inputs, plan, distinct = _batch(stack)
    weights = stack.layer_weights(0)
    assert not prediction.uses_distinct_table(inputs, weights, distinct)  # 8 x 96 weights: too small
    big = _stack(hidden=512, proj=256)
    inputs, plan, distinct = _batch(big)
    assert prediction.uses_distinct_table(inputs, big.layer_weights(0), distinct)
    all_distinct = DistinctInputs(inputs[0], torch.arange(plan.n_rows).expand(2, -1))
    assert not prediction.uses_distinct_table(inputs, big.layer_weights(0), all_distinct)


def test_from_an_initial_state_matches_the_reference(one_torch_thread):
    stack = _stack()
    inputs, plan, _ = _batch(stack)
    torch.manual_seed(2)
    state = [(torch.randn(2, 8, 8), torch.randn(2, 8, 24)) for _ in range(2)]
    _assert_matches_reference(stack, inputs, plan, state=state)


def test_prepacked_copies_follow_weight_updates(directions_on_threads):
    stack = _stack()
    inputs, plan, _ = _batch(stack)
    with torch.no_grad():
        before = stack(inputs, plan)[0][-1]
        stack.hidden_weights[1].mul_(0.5)
        after = stack(inputs, plan)[0][-1]
        reference = stack(inputs, plan, path="reference")[0][-1]
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, reference, rtol=0, atol=1e-6)


def test_an_unknown_path_is_refused():
    stack = _stack()
    inputs, plan, _ = _batch(stack)
    with pytest.raises(ValueError, match="path must be one of"):
        stack(inputs, plan, path="fast")
