"""The recurrence (one autograd node per layer, training's path) against the reference cell:
values and gradients, in float32 and float64."""
import dataclasses
import random

import pytest
import torch

from spacy_elmo.models.pytorch.lstm import BiLstmStack, Clips, LayerWeights, PackingPlan, reference_layer
from spacy_elmo.models.pytorch.lstm.recurrence import lstm_recurrence
from spacy_elmo.models.pytorch.options import NAMED_SIZES

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}


def _stack(dtype, *, n_layers=2, skip=True, cell_clip=None, proj_clip=None, dropout=0.0, hidden=12, proj=6):
    options = dataclasses.replace(
        NAMED_SIZES["tiny"], lstm_dim=hidden, projection_dim=proj, n_layers=n_layers,
        use_skip_connections=skip, cell_clip=cell_clip, proj_clip=proj_clip,
    )
    torch.manual_seed(0)
    stack = BiLstmStack(options).to(dtype).train()
    with torch.no_grad():  # a non-zero bias, so that its gradient is tested on a real point
        for bias in stack.biases:
            bias.normal_(0.0, 0.5)
    stack.set_dropout(dropout)
    return stack


def _plan(lengths):
    return PackingPlan.from_sorted_lengths(sorted(lengths, reverse=True))


def _train_step(stack, inputs, plan, initial_state=None, path="auto"):
    """Outputs, final states and the gradients of every input and parameter, for a loss on all of them."""
    stack.zero_grad(set_to_none=True)
    inputs = inputs.detach().requires_grad_()
    state = None
    if initial_state is not None:
        state = [(h.detach().requires_grad_(), c.detach().requires_grad_()) for h, c in initial_state]
    torch.manual_seed(1)  # the dropout masks
    outputs, final_states = stack(inputs, plan, state, path=path)
    weights = torch.Generator().manual_seed(2)
    results = list(outputs) + [t for pair in final_states for t in pair]
    loss = sum((t * torch.randn(t.shape, generator=weights, dtype=t.dtype)).sum() for t in results)
    loss.backward()
    grads = [inputs.grad] + [p.grad for p in stack.parameters()]
    if state is not None:
        grads += [t.grad for pair in state for t in pair]
    return [t.detach() for t in results], grads


def _assert_same_training(stack, inputs, plan, initial_state=None):
    tolerance = TOLERANCE[inputs.dtype]
    assert stack.choose_path(inputs.requires_grad_()) == "recurrence"
    new_results, new_grads = _train_step(stack, inputs, plan, initial_state)
    old_results, old_grads = _train_step(stack, inputs, plan, initial_state, path="reference")
    for new, old in zip(new_results + new_grads, old_results + old_grads):
        torch.testing.assert_close(new, old, rtol=tolerance, atol=tolerance)
    return new_results


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "n_layers,skip,clips,dropout",
    [
        (1, False, (None, None), 0.0),
        (2, True, (None, None), 0.0),
        (2, True, (0.3, 0.2), 0.25),  # small clips: values hit them
        (2, False, (3.0, 3.0), 0.1),
    ],
)
@pytest.mark.parametrize("threads", [1, 2])
def test_training_matches_the_reference_cell(dtype, n_layers, skip, clips, dropout, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)  # 2: the directions on two threads
    try:
        rng = random.Random(n_layers + threads)
        lengths = [rng.randint(1, 9) for _ in range(7)] + [1, 1, 9]
        plan = _plan(lengths)
        stack = _stack(dtype, n_layers=n_layers, skip=skip, cell_clip=clips[0], proj_clip=clips[1], dropout=dropout)
        torch.manual_seed(3)
        inputs = torch.randn(2, plan.n_rows, 6, dtype=dtype) * 2
        results = _assert_same_training(stack, inputs, plan)
    finally:
        torch.set_num_threads(before)
    cell_clip, proj_clip = clips
    if cell_clip is not None and cell_clip < 1:
        final_c = results[n_layers + 1]  # layer 0's final cell
        assert (final_c.abs() == cell_clip).any()
        assert (results[0].abs() == proj_clip).any()  # layer 0 has no residual


def test_training_from_an_initial_state_matches(one_torch_thread):
    plan = _plan([5, 3, 3, 1])
    stack = _stack(torch.float64, cell_clip=0.5, proj_clip=0.4)
    torch.manual_seed(4)
    inputs = torch.randn(2, plan.n_rows, 6, dtype=torch.float64)
    state = [(torch.randn(2, 4, 6, dtype=torch.float64), torch.randn(2, 4, 12, dtype=torch.float64))
             for _ in range(2)]
    _assert_same_training(stack, inputs, plan, state)


def test_gradients_of_only_a_final_state_or_only_outputs(one_torch_thread):
    plan = _plan([4, 2, 1])
    stack = _stack(torch.float64, n_layers=1, proj_clip=0.5)
    inputs = torch.randn(2, plan.n_rows, 6, dtype=torch.float64)
    for pick in (lambda outputs, states: states[0][1], lambda outputs, states: outputs[0]):
        grads = []
        for path in ("reference", "recurrence"):
            stack.zero_grad(set_to_none=True)
            x = inputs.clone().requires_grad_()
            pick(*stack(x, plan, path=path)).sum().backward()
            grads.append([x.grad] + [p.grad for p in stack.parameters()])
        for new, old in zip(*grads):
            torch.testing.assert_close(new, old, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("k", [1, 2])
def test_gradcheck(k, one_torch_thread):
    """Both the one-direction (2-D) and the batched several-direction code."""
    torch.manual_seed(5)
    hidden, proj = 3, 2
    plan = _plan([4, 3, 1])
    clips = Clips(0.6, 0.5)
    n_rows = plan.n_rows

    def leaf(*shape, scale=1.0):
        return (torch.randn(*shape, dtype=torch.float64) * scale).requires_grad_()

    args = (
        leaf(k, n_rows, proj), leaf(k, proj, 4 * hidden), leaf(k, proj, 4 * hidden), leaf(k, 4 * hidden),
        leaf(k, hidden, proj), leaf(k, 3, proj, scale=0.5), leaf(k, 3, hidden, scale=0.5),
    )

    def run(x, w_input, w_hidden, bias, w_proj, h0=None, c0=None):
        state = None if h0 is None else (h0, c0)
        hidden_out, (h, c) = lstm_recurrence(plan, clips, x, LayerWeights(w_input, w_hidden, bias, w_proj), state)
        return hidden_out, h, c

    assert torch.autograd.gradcheck(run, args)
    assert torch.autograd.gradcheck(run, args[:5])


def test_both_directions_at_once_match_the_reference_layer(one_torch_thread):
    """The batched code (what CUDA runs) against the reference on both directions."""
    plan = _plan([6, 4, 4, 2, 1])
    stack = _stack(torch.float64, n_layers=1, cell_clip=0.4, proj_clip=0.3)
    torch.manual_seed(6)
    inputs = torch.randn(2, plan.n_rows, 6, dtype=torch.float64, requires_grad=True)
    upstream = [torch.randn(2, plan.n_rows, 6, dtype=torch.float64), torch.randn(2, 5, 6, dtype=torch.float64),
                torch.randn(2, 5, 12, dtype=torch.float64)]
    runs = []
    for layer in (lambda w: lstm_recurrence(plan, stack.clips, inputs, w),
                  lambda w: reference_layer(inputs, plan, w, stack.clips)):
        stack.zero_grad(set_to_none=True)
        inputs.grad = None
        hidden, (h, c) = layer(stack.layer_weights(0))
        sum((t * u).sum() for t, u in zip((hidden, h, c), upstream)).backward()
        runs.append([hidden.detach(), h.detach(), c.detach(), inputs.grad] + [p.grad for p in stack.parameters()])
    for new, old in zip(*runs):
        torch.testing.assert_close(new, old, rtol=1e-10, atol=1e-10)


def _graph_names(tensor):
    names, todo = set(), [tensor.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node.name() not in names:
            names.add(node.name())
            todo.extend(next_node for next_node, _ in node.next_functions)
    return names


def test_recurrence_only_when_training_without_autocast(one_torch_thread):
    plan = _plan([3, 2])
    stack = _stack(torch.float32)
    inputs = torch.randn(2, plan.n_rows, 6)
    assert stack.choose_path(inputs) == "recurrence"
    assert any("LstmRecurrence" in name for name in _graph_names(stack(inputs, plan)[0][-1]))
    assert not any("LstmRecurrence" in name for name in _graph_names(stack(inputs, plan, path="reference")[0][-1]))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert stack.choose_path(inputs) == "reference"
        outputs, _ = stack(inputs, plan)
    assert outputs[-1].dtype == torch.bfloat16
    assert not any("LstmRecurrence" in name for name in _graph_names(outputs[-1]))
    with torch.no_grad():
        assert stack.choose_path(inputs) == "prediction"
        assert stack(inputs, plan)[0][-1].grad_fn is None
