"""The fused GPU step (Triton) against the reference cell; without a GPU, Triton's
interpreter runs it on CPU tensors (tests/conftest.py sets ``TRITON_INTERPRET=1``)."""
import dataclasses

import pytest
import torch

from spacy_elmo.models.pytorch.lstm import BiLstmStack, PackingPlan, fused_step, reference_layer
from spacy_elmo.models.pytorch.options import NAMED_SIZES

pytest.importorskip("triton")
needs_interpreter = pytest.mark.skipif(
    not fused_step.fused_step_available(torch.device("cpu")), reason="Triton's interpreter is off"
)


def _stack(hidden=40, proj=20, cell_clip=0.5, proj_clip=0.4):
    options = dataclasses.replace(
        NAMED_SIZES["fixture"], lstm_dim=hidden, projection_dim=proj, n_layers=1,
        cell_clip=cell_clip, proj_clip=proj_clip,
    )
    torch.manual_seed(0)
    stack = BiLstmStack(options).eval()
    with torch.no_grad():
        stack.biases[0].normal_(0.0, 0.5)
    return stack


@needs_interpreter
@pytest.mark.parametrize("clips", [(0.5, 0.4), (None, None)])
@pytest.mark.parametrize("with_state", [False, True])
def test_fused_layer_matches_the_reference(clips, with_state):
    # 40 cells and 20 projections: not multiples of the tiles, so the masks are exercised
    stack = _stack(cell_clip=clips[0], proj_clip=clips[1])
    plan = PackingPlan.from_sorted_lengths([7, 5, 5, 3, 1])
    torch.manual_seed(1)
    inputs = torch.randn(2, plan.n_rows, 20) * 2
    state = (torch.randn(2, 5, 20), torch.randn(2, 5, 40)) if with_state else None
    weights = stack.layer_weights(0)
    with torch.no_grad():
        got, (h, c) = fused_step.fused_layer(inputs, plan, weights, stack.clips, state)
        want, (want_h, want_c) = reference_layer(inputs, plan, weights, stack.clips, state)
    for a, b in ((got, want), (h, want_h), (c, want_c)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    if clips[1] is not None:
        assert (got.abs() == 0.4).any()  # the projection clip bites


@needs_interpreter
def test_one_direction_and_one_row():
    stack = _stack()
    plan = PackingPlan.from_sorted_lengths([3])
    inputs = torch.randn(1, plan.n_rows, 20)
    weights = stack.layer_weights(0).directions(slice(1, 2))
    with torch.no_grad():
        got, _ = fused_step.fused_layer(inputs, plan, weights, stack.clips)
        want, _ = reference_layer(inputs, plan, weights, stack.clips)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_the_path_is_refused_where_it_cannot_run(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    stack = _stack()
    plan = PackingPlan.from_sorted_lengths([2])
    with pytest.raises(ValueError, match="path 'fused' needs Triton and float32 inputs on a CUDA device"):
        with torch.no_grad():
            stack(torch.randn(2, 2, 20), plan, path="fused")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_fused_path_on_cuda_matches_the_reference():
    stack = _stack().cuda()
    torch.backends.cuda.matmul.allow_tf32 = False
    plan = PackingPlan.from_sorted_lengths([30, 22, 9, 9, 1] * 20)
    inputs = torch.randn(2, plan.n_rows, 20, device="cuda")
    with torch.no_grad():
        got = stack(inputs, plan, path="fused")[0][0]
        want = stack(inputs, plan, path="reference")[0][0]
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
