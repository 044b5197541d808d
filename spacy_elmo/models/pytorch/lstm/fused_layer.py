"""A whole layer of the cell in one Triton kernel launch, on a GPU; and its backward in another.

:func:`~.cell.lstm_cell` launches a dozen small kernels per step; here each program owns a tile of independent
sequences for the whole layer. The products are IEEE fp32 (with TF32 off, the reference's within rounding); under
bf16 autocast the layer stays float32, as Triton's interpreter, which the CPU tests run, has no bf16 products.
"""
import functools
import importlib.util
import os
from types import ModuleType
from typing import Any, Optional, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ..devices import to_device
from .cell import Clips, LayerWeights, LstmState, PackingPlan
from .recurrence import gate_weight_grads

#: Tile sizes: sequences a program owns, cells of a gate block, and the reduction's width.
BLOCK_ROWS, BLOCK_CELLS, BLOCK_REDUCE = 16, 32, 32


def fused_layer_available(device: torch.device) -> bool:
    """Whether the kernel can run on `device`: Triton on CUDA, or its interpreter (tests) on CPU."""
    if importlib.util.find_spec("triton") is None:
        return False
    if device.type == "cuda":
        return True
    return device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"


@functools.lru_cache(maxsize=None)
def _kernels() -> ModuleType:
    """The kernel's module, imported at first use: Triton is optional, and its
    interpreter (``TRITON_INTERPRET=1``) must be on before ``triton.language`` is imported."""
    from . import fused_kernels

    return fused_kernels


@functools.lru_cache(maxsize=8)
def step_tables(plan: PackingPlan, device: torch.device) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """What the kernel reads of `plan`, int32 on `device`; cached: every layer of a batch and first-use timing share it.

    Returns ``batch_sizes`` and ``offsets`` per step; ``h_offsets`` (``n_steps + 1``): each step's previous ``h`` in the
    kernel's ``h`` buffer (first ``n_sequences`` rows: the initial state, then the packed outputs); ``lengths``: steps
    per sequence (longest first)."""
    sizes = (*plan.batch_sizes, 0)
    n_sequences = sizes[0]
    lengths = [0] * n_sequences
    for t in range(len(plan.batch_sizes)):
        for row in range(sizes[t + 1], sizes[t]):  # the sequences that end at step t
            lengths[row] = t + 1
    h_offsets = [0] + [n_sequences + offset for offset in plan.offsets]
    tables = (plan.batch_sizes, plan.offsets, h_offsets, lengths)
    return tuple(to_device(torch.tensor(table, dtype=torch.int32), device) for table in tables)  # type: ignore[return-value]


def fused_layer(
    inputs: Tensor, plan: PackingPlan, weights: LayerWeights, clips: Clips, state: Optional[LstmState] = None,
) -> Tuple[Tensor, LstmState]:
    """One layer as :func:`~.cell.reference_layer` computes it, in float32 whatever the inputs' dtype or autocast.

    Differentiable (two kernels) where autograd records, one kernel where not. `inputs`: *Shape:* ``(k, n_rows, P)``,
    packed as `plan` says; `state`: ``h`` ``(k, n, P)`` and ``c`` ``(k, n, H)`` per sequence, or ``None`` (zeros).
    Returns the outputs ``(k, n_rows, P)`` and each sequence's final ``(h, c)``."""
    h0, c0 = state if state is not None else (None, None)
    tensors = tuple(
        None if t is None else t.float()
        for t in (inputs, weights.input, weights.hidden, weights.bias, weights.projection, h0, c0)
    )
    with torch.autocast(inputs.device.type, enabled=False):  # float32 under autocast too
        if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
            outputs, final_h, final_c = _FusedLayer.apply(plan, clips, *tensors)
            return outputs, (final_h, final_c)
        outputs, (final_h, final_c), _ = _forward(plan, clips, *tensors, keep_trace=False)
        return outputs, (final_h, final_c)


def _forward(
    plan: PackingPlan, clips: Clips, inputs: Tensor, w_input: Tensor, w_hidden: Tensor, bias: Tensor,
    w_proj: Tensor, h0: Optional[Tensor], c0: Optional[Tensor], *, keep_trace: bool,
) -> Tuple[Tensor, LstmState, Optional[Tensor]]:
    """The forward kernel: outputs, final state, and (`keep_trace`) the trace ``(k, n_rows, 6H + P)``."""
    k, n_rows, _ = inputs.shape
    hidden_size, proj_size = w_hidden.shape[2] // 4, w_proj.shape[2]
    n_sequences = plan.n_sequences
    w_hidden, w_proj = w_hidden.contiguous(), w_proj.contiguous()
    gate_inputs = torch.baddbmm(bias.unsqueeze(1), inputs, w_input)
    h = inputs.new_zeros((k, n_sequences + n_rows, proj_size))
    c = inputs.new_zeros((k, n_sequences, hidden_size))
    if h0 is not None:
        h[:, :n_sequences] = h0
    if c0 is not None:
        c.copy_(c0)
    trace = inputs.new_empty((k, n_rows, 6 * hidden_size + proj_size)) if keep_trace else None
    if not n_sequences:
        return h[:, n_sequences:], (h[:, :0], c), trace
    batch_sizes, offsets, h_offsets, lengths = step_tables(plan, inputs.device)
    block_p = _block_p(proj_size)
    kept = trace if trace is not None else h  # a stand-in pointer the kernel does not use
    _kernels().lstm_layer[(k, _cdiv(n_sequences, BLOCK_ROWS))](
        gate_inputs, w_hidden, w_proj, h, c, kept,
        batch_sizes, offsets, h_offsets, lengths,
        hidden_size, proj_size,
        gate_inputs.stride(0), gate_inputs.stride(1), w_hidden.stride(0), w_hidden.stride(1),
        w_proj.stride(0), w_proj.stride(1), h.stride(0), h.stride(1), c.stride(0), c.stride(1),
        kept.stride(0), kept.stride(1),
        clips.cell or 0.0, clips.projection or 0.0,
        HAS_CELL_CLIP=clips.cell is not None, HAS_PROJ_CLIP=clips.projection is not None, KEEP_TRACE=keep_trace,
        BLOCK_N=BLOCK_ROWS, BLOCK_H=BLOCK_CELLS, BLOCK_K=BLOCK_REDUCE, BLOCK_P=block_p,
        num_warps=_warps(block_p),
    )
    final_h = h[:, _last_rows(plan, inputs.device) + n_sequences]
    return h[:, n_sequences:], (final_h, c), trace


class _FusedLayer(torch.autograd.Function):
    """The fused layer as one autograd node: the forward kernel keeps a trace, the backward kernel reads it."""

    @staticmethod
    def forward(ctx: Any, plan: PackingPlan, clips: Clips, inputs: Tensor, w_input: Tensor, w_hidden: Tensor,
                bias: Tensor, w_proj: Tensor, h0: Optional[Tensor], c0: Optional[Tensor]):
        outputs, (final_h, final_c), trace = _forward(
            plan, clips, inputs, w_input, w_hidden, bias, w_proj, h0, c0, keep_trace=True
        )
        ctx.plan, ctx.clips = plan, clips
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(inputs, w_input, w_hidden, w_proj, h0, c0, outputs, trace)
        return outputs.clone(), final_h, final_c  # not a view of the kernel's buffer: callers may change it in place

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_outputs: Optional[Tensor], grad_final_h: Optional[Tensor],
                 grad_final_c: Optional[Tensor]):
        plan: PackingPlan = ctx.plan
        clips: Clips = ctx.clips
        inputs, w_input, w_hidden, w_proj, h0, c0, outputs, trace = ctx.saved_tensors
        k, n_rows, proj_size = inputs.shape
        hidden_size = w_proj.shape[1]
        n_sequences = plan.n_sequences
        w_hidden, w_proj = w_hidden.contiguous(), w_proj.contiguous()
        # Becomes d(the projection's product) as the kernel walks back; each step adds d(h_prev) to the one before.
        d_h = grad_outputs.clone(memory_format=torch.contiguous_format) if grad_outputs is not None \
            else torch.zeros_like(inputs)
        d_c = grad_final_c.clone(memory_format=torch.contiguous_format) if grad_final_c is not None \
            else inputs.new_zeros((k, n_sequences, hidden_size))
        d_h0 = inputs.new_zeros((k, n_sequences, proj_size))
        d_gates = inputs.new_zeros((k, n_rows, 4 * hidden_size))
        if n_sequences:
            if grad_final_h is not None:
                d_h[:, _last_rows(plan, inputs.device)] += grad_final_h
            batch_sizes, offsets, _, lengths = step_tables(plan, inputs.device)
            initial_c = c0.contiguous() if c0 is not None else d_c.new_zeros(d_c.shape)
            block_p = _block_p(proj_size)
            _kernels().lstm_layer_backward[(k, _cdiv(n_sequences, BLOCK_ROWS))](
                d_h, d_gates, d_c, d_h0, trace, initial_c, w_hidden, w_proj,
                batch_sizes, offsets, lengths,
                hidden_size, proj_size,
                d_h.stride(0), d_h.stride(1), d_gates.stride(0), d_gates.stride(1), d_c.stride(0), d_c.stride(1),
                d_h0.stride(0), d_h0.stride(1), trace.stride(0), trace.stride(1),
                initial_c.stride(0), initial_c.stride(1),
                w_hidden.stride(0), w_hidden.stride(1), w_proj.stride(0), w_proj.stride(1),
                clips.cell or 0.0, clips.projection or 0.0,
                HAS_CELL_CLIP=clips.cell is not None, HAS_PROJ_CLIP=clips.projection is not None,
                BLOCK_N=BLOCK_ROWS, BLOCK_H=BLOCK_CELLS, BLOCK_P=block_p, num_warps=_warps(block_p),
                num_stages=1,  # its five weight tiles per block, double-buffered, pass the shared memory at P >= 256
            )
        needs = ctx.needs_input_grad
        d_inputs = torch.bmm(d_gates, w_input.transpose(1, 2)) if needs[2] else None
        d_w_input = d_w_hidden = d_bias = None
        if any(needs[3:6]):
            d_w_input, d_w_hidden, d_bias = (
                gate_weight_grads(plan.batch_sizes, inputs, outputs, h0, d_gates) if n_sequences
                else (torch.zeros_like(w_input), torch.zeros_like(w_hidden), w_input.new_zeros((k, 4 * hidden_size)))
            )
        m = trace[..., 5 * hidden_size : 6 * hidden_size]
        d_w_proj = torch.bmm(m.transpose(1, 2), d_h) if needs[6] else None
        return (
            None, None, d_inputs,
            d_w_input if needs[3] else None, d_w_hidden if needs[4] else None, d_bias if needs[5] else None,
            d_w_proj, d_h0 if needs[7] else None, d_c if needs[8] else None,
        )


def _last_rows(plan: PackingPlan, device: torch.device) -> Tensor:
    """Each sequence's row at its last step, among the packed rows, *Shape:* ``(n_sequences,)``."""
    _, offsets, _, lengths = step_tables(plan, device)
    return offsets[lengths.long() - 1].long() + torch.arange(len(lengths), device=device)


def _block_p(proj_size: int) -> int:
    return max(16, next_power_of_2(proj_size))


def _warps(block_p: int) -> int:
    return 4 if block_p <= 128 else 8


def next_power_of_2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)
