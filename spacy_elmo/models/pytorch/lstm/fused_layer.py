"""Prediction on a GPU: a whole layer of the cell in one Triton kernel launch.

:func:`~.cell.lstm_cell` runs a dozen small kernels per step, and the GPU waits on
each launch. Here one launch runs every step of a layer, both directions: the
sequences of a batch are independent, so each program owns a tile of them for
the whole layer (:func:`~.fused_kernels.lstm_layer`), keeps their cells in its
own rows of a buffer and reads each step's ``h`` back from the rows the step
before wrote. Only the input product, which has no recurrence, runs before it,
as one batched matrix product over all steps.

Products accumulate in fp32 with TF32 off, so the results are the reference's
within fp32 rounding. Under ``TRITON_INTERPRET=1`` the kernel runs on CPU tensors,
which is how the tests check it against the reference cell without a GPU.
"""
import functools
import importlib.util
import os
from types import ModuleType
from typing import Optional, Tuple

import torch
from torch import Tensor

from .cell import Clips, LayerWeights, LstmState, PackingPlan

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
    """What the kernel reads of `plan`, as int32 tensors on `device`; built once per plan
    (every layer of a batch, and the first-use timing, share them).

    :returns: ``batch_sizes`` and ``offsets`` per step; ``h_offsets`` (``n_steps + 1``):
        where each step's previous ``h`` is in the kernel's ``h`` buffer, whose first
        ``n_sequences`` rows hold the initial state and the rest the packed outputs;
        ``lengths``: steps per sequence (longest first).
    """
    sizes = (*plan.batch_sizes, 0)
    n_sequences = sizes[0]
    lengths = [0] * n_sequences
    for t in range(len(plan.batch_sizes)):
        for row in range(sizes[t + 1], sizes[t]):  # the sequences that end at step t
            lengths[row] = t + 1
    h_offsets = [0] + [n_sequences + offset for offset in plan.offsets]
    tables = (plan.batch_sizes, plan.offsets, h_offsets, lengths)
    return tuple(torch.tensor(table, dtype=torch.int32, device=device) for table in tables)  # type: ignore[return-value]


def fused_layer(
    inputs: Tensor, plan: PackingPlan, weights: LayerWeights, clips: Clips, state: Optional[LstmState] = None,
) -> Tuple[Tensor, LstmState]:
    """One layer in prediction, as :func:`~.cell.reference_layer` computes it.

    :param inputs: *Shape:* ``(k, n_rows, P)``, packed as `plan` says.
    :param state: ``h`` ``(k, n, P)`` and ``c`` ``(k, n, H)`` per sequence, or ``None`` (zeros).
    :returns: the outputs ``(k, n_rows, P)`` and each sequence's final ``(h, c)``.
    """
    k, n_rows, _ = inputs.shape
    hidden_size, proj_size = weights.hidden.shape[2] // 4, weights.projection.shape[2]
    n_sequences = plan.batch_sizes[0] if plan.batch_sizes else 0
    w_hidden, w_proj = weights.hidden.contiguous(), weights.projection.contiguous()
    gate_inputs = torch.baddbmm(weights.bias.unsqueeze(1), inputs, weights.input)
    h = inputs.new_zeros((k, n_sequences + n_rows, proj_size))
    c = inputs.new_zeros((k, n_sequences, hidden_size))
    if state is not None:
        h[:, :n_sequences] = state[0]
        c.copy_(state[1])
    if n_sequences:
        batch_sizes, offsets, h_offsets, lengths = step_tables(plan, inputs.device)
        block_p = max(16, next_power_of_2(proj_size))
        _kernels().lstm_layer[(k, _cdiv(n_sequences, BLOCK_ROWS))](
            gate_inputs, w_hidden, w_proj, h, c,
            batch_sizes, offsets, h_offsets, lengths,
            hidden_size, proj_size,
            gate_inputs.stride(0), gate_inputs.stride(1), w_hidden.stride(0), w_hidden.stride(1),
            w_proj.stride(0), w_proj.stride(1), h.stride(0), h.stride(1), c.stride(0), c.stride(1),
            clips.cell or 0.0, clips.projection or 0.0,
            HAS_CELL_CLIP=clips.cell is not None, HAS_PROJ_CLIP=clips.projection is not None,
            BLOCK_N=BLOCK_ROWS, BLOCK_H=BLOCK_CELLS, BLOCK_K=BLOCK_REDUCE, BLOCK_P=block_p,
            num_warps=4 if block_p <= 128 else 8,
        )
        last_rows = h_offsets[1:][lengths.long() - 1].long() + torch.arange(n_sequences, device=inputs.device)
        final_h = h[:, last_rows]
    else:
        final_h = h[:, :0]
    return h[:, n_sequences:], (final_h, c)


def next_power_of_2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)
