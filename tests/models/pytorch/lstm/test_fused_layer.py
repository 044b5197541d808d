"""The fused GPU layer (one Triton kernel) against the reference cell; without a GPU,
Triton's interpreter runs it on CPU tensors (tests/conftest.py sets ``TRITON_INTERPRET=1``)."""
import dataclasses

import pytest
import torch

from spacy_elmo.models.pytorch.lstm import BiLstmStack, PackingPlan, fused_layer, reference_layer
from spacy_elmo.models.pytorch.options import NAMED_SIZES

pytest.importorskip("triton")
needs_interpreter = pytest.mark.skipif(
    not fused_layer.fused_layer_available(torch.device("cpu")), reason="Triton's interpreter is off"
)


def _stack(hidden=40, proj=20, cell_clip=0.5, proj_clip=0.4):
    options = dataclasses.replace(
        NAMED_SIZES["tiny"], lstm_dim=hidden, projection_dim=proj, n_layers=1,
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
        got, (h, c) = fused_layer.fused_layer(inputs, plan, weights, stack.clips, state)
        want, (want_h, want_c) = reference_layer(inputs, plan, weights, stack.clips, state)
    for a, b in ((got, want), (h, want_h), (c, want_c)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    if clips[1] is not None:
        assert (got.abs() == 0.4).any()  # the projection clip bites


@needs_interpreter
def test_more_sequences_than_one_program_owns():
    """Several programs of 16 sequences, the last one partly empty, and sequences
    that end at every step (each program runs as long as its longest sequence)."""
    stack = _stack(hidden=24, proj=16)
    lengths = sorted((1 + (7 * i) % 11 for i in range(37)), reverse=True)
    plan = PackingPlan.from_sorted_lengths(lengths)
    torch.manual_seed(2)
    inputs = torch.randn(2, plan.n_rows, 16)
    weights = stack.layer_weights(0)
    with torch.no_grad():
        got, (h, c) = fused_layer.fused_layer(inputs, plan, weights, stack.clips)
        want, (want_h, want_c) = reference_layer(inputs, plan, weights, stack.clips)
    for a, b in ((got, want), (h, want_h), (c, want_c)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_step_tables_say_where_each_step_reads_and_writes():
    plan = PackingPlan.from_sorted_lengths([3, 2, 2, 1])
    batch_sizes, offsets, h_offsets, lengths = fused_layer.step_tables(plan, torch.device("cpu"))
    assert batch_sizes.tolist() == [4, 3, 1] and offsets.tolist() == [0, 4, 7]
    assert h_offsets.tolist() == [0, 4, 8, 11]  # 4 rows of initial state, then the packed steps
    assert lengths.tolist() == [3, 2, 2, 1]


@needs_interpreter
def test_one_direction_and_one_row():
    stack = _stack()
    plan = PackingPlan.from_sorted_lengths([3])
    inputs = torch.randn(1, plan.n_rows, 20)
    weights = stack.layer_weights(0).directions(slice(1, 2))
    with torch.no_grad():
        got, _ = fused_layer.fused_layer(inputs, plan, weights, stack.clips)
        want, _ = reference_layer(inputs, plan, weights, stack.clips)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_the_path_is_refused_where_it_cannot_run(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    stack = _stack()
    plan = PackingPlan.from_sorted_lengths([2])
    with pytest.raises(ValueError, match="path 'fused' needs Triton and a CUDA device"):
        with torch.no_grad():
            stack(torch.randn(2, 2, 20), plan, path="fused")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_fused_path_on_cuda_matches_the_reference():
    stack = _stack().cuda()
    torch.backends.cuda.matmul.allow_tf32 = False
    plan = PackingPlan.from_sorted_lengths(sorted([30, 22, 9, 9, 1] * 20, reverse=True))
    inputs = torch.randn(2, plan.n_rows, 20, device="cuda")
    with torch.no_grad():
        got = stack(inputs, plan, path="fused")[0][0]
        want = stack(inputs, plan, path="reference")[0][0]
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


@needs_interpreter
def test_the_stack_on_the_fused_path_matches_the_reference():
    """Two layers with the residual connection, through BiLstmStack's interface."""
    options = dataclasses.replace(NAMED_SIZES["tiny"], lstm_dim=24, projection_dim=16, n_layers=2)
    torch.manual_seed(3)
    stack = BiLstmStack(options).eval()
    plan = PackingPlan.from_sorted_lengths([6, 4, 4, 2])
    inputs = torch.randn(2, plan.n_rows, 16)
    with torch.no_grad():
        got, got_states = stack(inputs, plan, path="fused")
        want, want_states = stack(inputs, plan, path="reference")
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    for (h, c), (want_h, want_c) in zip(got_states, want_states):
        torch.testing.assert_close(h, want_h, rtol=0, atol=1e-6)
        torch.testing.assert_close(c, want_c, rtol=0, atol=1e-6)


@needs_interpreter
@pytest.mark.parametrize("forced", ["auto", "fused", "prediction"])
def test_prediction_on_a_gpu_times_the_fused_layer_against_the_step_path(monkeypatch, forced):
    """Where the rule applies (a CUDA device; here the interpreter stands in for it),
    prediction runs the faster of the two paths, timed once per layer size and batch
    bucket, or the one SPACY_ELMO_GPU_LAYER forces; the layers are the reference's."""
    from spacy_elmo.models.pytorch.lstm import stack as stack_module, tuning

    monkeypatch.setattr(stack_module, "gpu_layer_choice", lambda inputs: True)
    monkeypatch.setenv("SPACY_ELMO_GPU_LAYER", forced)
    ran = []
    monkeypatch.setattr(stack_module, "fused_layer", lambda *a, **k: ran.append("fused") or fused_layer.fused_layer(*a, **k))
    tuning.forget_decisions()
    options = dataclasses.replace(NAMED_SIZES["tiny"], lstm_dim=24, projection_dim=16, n_layers=2)
    torch.manual_seed(4)
    stack = BiLstmStack(options).eval()
    plan = PackingPlan.from_sorted_lengths([5, 3, 1])
    inputs = torch.randn(2, plan.n_rows, 16)
    with torch.no_grad():
        got, _ = stack(inputs, plan)
        want, _ = stack(inputs, plan, path="reference")
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    if forced == "auto":
        assert ran and {name for (choice, _), name in tuning._decisions.items() if choice == "gpu_layer"}
    else:
        assert bool(ran) == (forced == "fused")
    tuning.forget_decisions()


def _gradients(layer, inputs, plan, stack, state):
    """The layer's outputs, final state, and the gradients of a random projection of all
    three with respect to the inputs, the initial state and every weight."""
    leaves = [inputs, *(state or ())]
    for tensor in leaves:
        tensor.grad = None
    stack.zero_grad(set_to_none=True)
    outputs, (h, c) = layer(inputs, plan, stack.layer_weights(0), stack.clips, state)
    generator = torch.Generator().manual_seed(5)
    loss = sum((t * torch.randn(t.shape, generator=generator)).sum() for t in (outputs, h, c))
    loss.backward()
    return [outputs, h, c, *(t.grad for t in leaves), *(p.grad for p in stack.parameters())]


@needs_interpreter
@pytest.mark.parametrize("clips", [(0.5, 0.4), (None, None)])
@pytest.mark.parametrize("with_state", [False, True])
def test_fused_layer_gradients_match_the_reference(clips, with_state):
    """Training through the two kernels (the forward keeping its trace, the backward
    walking it in reverse): the loss's gradients are the reference's to 1e-5."""
    stack = _stack(cell_clip=clips[0], proj_clip=clips[1]).train()
    plan = PackingPlan.from_sorted_lengths([7, 5, 5, 3, 1])
    torch.manual_seed(1)
    inputs = (torch.randn(2, plan.n_rows, 20) * 2).requires_grad_()
    state = (torch.randn(2, 5, 20).requires_grad_(), torch.randn(2, 5, 40).requires_grad_()) if with_state else None
    got = _gradients(fused_layer.fused_layer, inputs, plan, stack, state)
    want = _gradients(reference_layer, inputs, plan, stack, state)
    assert len(got) == len(want) == (10 if with_state else 8)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    if clips[0] is not None:  # both clips bite, so their masks are exercised
        assert (got[0].abs() == 0.4).any() and (got[2].abs() == 0.5).any()


@needs_interpreter
def test_fused_gradients_with_several_programs_and_sequences_ending_at_every_step():
    stack = _stack(hidden=24, proj=16).train()
    lengths = sorted((1 + (7 * i) % 11 for i in range(37)), reverse=True)
    plan = PackingPlan.from_sorted_lengths(lengths)
    torch.manual_seed(2)
    inputs = torch.randn(2, plan.n_rows, 16).requires_grad_()
    got = _gradients(fused_layer.fused_layer, inputs, plan, stack, None)
    want = _gradients(reference_layer, inputs, plan, stack, None)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@needs_interpreter
@pytest.mark.parametrize("forced", ["auto", "fused", "steps"])
def test_training_on_a_gpu_takes_the_fused_layer_where_the_user_says_so(monkeypatch, forced):
    """On a CUDA device (the interpreter stands in for one), training runs the fused layer
    where SPACY_ELMO_GPU_TRAIN_LAYER=fused, never by timing (a resumed run computes as the
    uninterrupted one did); the gradients are the reference's either way."""
    from spacy_elmo.models.pytorch.lstm import stack as stack_module

    monkeypatch.setattr(stack_module, "gpu_layer_choice", lambda inputs: True)
    monkeypatch.setenv("SPACY_ELMO_GPU_TRAIN_LAYER", forced)
    ran = []
    monkeypatch.setattr(stack_module, "fused_layer", lambda *a, **k: ran.append("fused") or fused_layer.fused_layer(*a, **k))
    options = dataclasses.replace(NAMED_SIZES["tiny"], lstm_dim=24, projection_dim=16, n_layers=2)
    torch.manual_seed(4)
    stack = BiLstmStack(options).train()
    plan = PackingPlan.from_sorted_lengths([5, 3, 1])
    inputs = torch.randn(2, plan.n_rows, 16)

    def gradients(path):
        stack.zero_grad(set_to_none=True)
        outputs, _ = stack(inputs, plan, path=path)
        sum((t * t).sum() for t in outputs).backward()
        return [*outputs, *(p.grad for p in stack.parameters())]

    got = gradients("auto")
    assert len(ran) == (2 if forced == "fused" else 0)  # one per layer
    ran.clear()
    want = gradients("reference")
    assert not ran  # a path the caller names is that path
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_fused_training_on_cuda_matches_the_reference():
    torch.backends.cuda.matmul.allow_tf32 = False
    stack = _stack().cuda().train()
    plan = PackingPlan.from_sorted_lengths(sorted([30, 22, 9, 9, 1] * 20, reverse=True))
    inputs = torch.randn(2, plan.n_rows, 20, device="cuda")

    def gradients(path):
        stack.zero_grad(set_to_none=True)
        outputs, _ = stack(inputs, plan, path=path)
        (outputs[0] * outputs[0]).sum().backward()
        return [outputs[0], *(p.grad for p in stack.parameters())]

    for a, b in zip(gradients("fused"), gradients("reference")):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@needs_interpreter
def test_under_autocast_the_fused_layer_trains_in_float32(monkeypatch):
    """Under bfloat16 autocast training's path is the reference; on a GPU (the interpreter
    stands in), told to, the fused layer runs instead, and it computes in float32."""
    from spacy_elmo.models.pytorch.lstm import stack as stack_module

    monkeypatch.setattr(stack_module, "gpu_layer_choice", lambda inputs: True)
    monkeypatch.setenv("SPACY_ELMO_GPU_TRAIN_LAYER", "fused")
    ran = []
    monkeypatch.setattr(stack_module, "fused_layer", lambda *a, **k: ran.append("fused") or fused_layer.fused_layer(*a, **k))
    stack = _stack(hidden=24, proj=16).train()
    plan = PackingPlan.from_sorted_lengths([4, 2])
    inputs = torch.randn(2, plan.n_rows, 16)

    def gradients(path, autocast):
        stack.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            outputs, _ = stack(inputs, plan, path=path)
        outputs[0].float().square().sum().backward()
        return [outputs[0], *(p.grad for p in stack.parameters())]

    got = gradients("auto", autocast=True)
    assert ran and got[0].dtype == torch.float32
    for a, b in zip(got, gradients("reference", autocast=False)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    ran.clear()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        stack.eval()(inputs, plan)
    assert not ran  # prediction under autocast keeps its own path (and its outputs' dtype)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_fused_training_on_cuda_at_the_original_projection_width():
    """512 projections (the original ELMo's): the widest tiles, 8 warps, the most shared memory."""
    torch.backends.cuda.matmul.allow_tf32 = False
    stack = _stack(hidden=256, proj=512).cuda().train()
    plan = PackingPlan.from_sorted_lengths(sorted([25, 14, 3] * 12, reverse=True))
    inputs = torch.randn(2, plan.n_rows, 512, device="cuda")

    def gradients(path):
        stack.zero_grad(set_to_none=True)
        outputs, _ = stack(inputs, plan, path=path)
        outputs[0].square().mean().backward()
        return [outputs[0], *(p.grad for p in stack.parameters())]

    for a, b in zip(gradients("fused"), gradients("reference")):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@needs_interpreter
def test_the_fused_layer_s_outputs_may_be_changed_in_place():
    stack = _stack(hidden=24, proj=16).train()
    plan = PackingPlan.from_sorted_lengths([3, 2])
    outputs, _ = fused_layer.fused_layer(torch.randn(2, plan.n_rows, 16), plan, stack.layer_weights(0), stack.clips)
    outputs.mul_(2.0).sum().backward()
    assert stack.hidden_weights[0].grad is not None
