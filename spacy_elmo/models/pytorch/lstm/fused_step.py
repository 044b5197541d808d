"""Prediction on a GPU: one time step of the cell in two fused Triton kernels.

:func:`~.cell.lstm_cell` runs a dozen small kernels per step. Here a step is two,
each over both directions in one launch:

- ``gates_and_cell``: ``gates = gate_inputs + h W_h`` (one tile of rows by a
  block of cells, all four gates), then the activations, the cell update and
  its clip; writes ``c`` and ``m = o * tanh(c)``.
- ``projection``: ``h = clip(m W_p)``, written straight into the layer's outputs.

Products accumulate in fp32 with TF32 off, so the results are the reference's
within fp32 rounding. Under ``TRITON_INTERPRET=1`` the kernels run on CPU tensors,
which is how the tests check them against the reference cell without a GPU.
"""
import functools
import importlib.util
import os
from types import ModuleType
from typing import Iterable, List, Optional, Tuple

import torch
from torch import Tensor

from .cell import Clips, LayerWeights
from .packing import LstmState, PackingPlan

#: Tile sizes: rows of a step, cells of a gate, and the reduction's width.
BLOCK_ROWS, BLOCK_CELLS, BLOCK_REDUCE = 16, 32, 32


def fused_step_available(device: torch.device) -> bool:
    """Whether the kernels can run on `device`: Triton on CUDA, or its interpreter (tests) on CPU."""
    if importlib.util.find_spec("triton") is None:
        return False
    if device.type == "cuda":
        return True
    return device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"


@functools.lru_cache(maxsize=None)
def _kernels() -> ModuleType:
    """The kernels' module, imported at first use: Triton is optional, and its
    interpreter (``TRITON_INTERPRET=1``) must be on before ``triton.language`` is imported."""
    from . import fused_kernels

    return fused_kernels




def fused_step(
    gate_inputs: Tensor, state: Optional[LstmState], weights: LayerWeights, clips: Clips, out_h: Tensor,
) -> LstmState:
    """:func:`~.cell.lstm_cell` in two kernels; the new ``h`` is written into `out_h`.

    :param gate_inputs: *Shape:* ``(k, n, 4H)``, rows contiguous in the last dimension.
    :param state: ``h`` ``(k, n, P)`` and ``c`` ``(k, n, H)``, or ``None`` (zeros).
    :param out_h: *Shape:* ``(k, n, P)``, a view into the layer's outputs.
    :returns: ``(out_h, c)``.
    """
    k, n, four_h = gate_inputs.shape
    hidden_size, proj_size = four_h // 4, weights.projection.shape[2]
    cell = gate_inputs.new_empty((k, n, hidden_size))
    m = torch.empty_like(cell)
    h_prev, c_prev = state if state is not None else (cell, cell)  # unread without a state
    w_hidden, w_proj = weights.hidden, weights.projection
    kernels = _kernels()
    rows = _cdiv(n, BLOCK_ROWS)
    kernels.gates_and_cell[(k, rows, _cdiv(hidden_size, BLOCK_CELLS))](
        gate_inputs, h_prev, c_prev, w_hidden, cell, m,
        n, proj_size, hidden_size,
        gate_inputs.stride(0), gate_inputs.stride(1), h_prev.stride(0), h_prev.stride(1),
        c_prev.stride(0), c_prev.stride(1), w_hidden.stride(0), w_hidden.stride(1), cell.stride(0), cell.stride(1),
        clips.cell or 0.0,
        HAS_STATE=state is not None, HAS_CLIP=clips.cell is not None,
        BLOCK_N=BLOCK_ROWS, BLOCK_H=BLOCK_CELLS, BLOCK_K=BLOCK_REDUCE,
    )
    kernels.projection[(k, rows, _cdiv(proj_size, BLOCK_CELLS))](
        m, w_proj, out_h,
        n, hidden_size, proj_size,
        m.stride(0), m.stride(1), w_proj.stride(0), w_proj.stride(1), out_h.stride(0), out_h.stride(1),
        clips.projection or 0.0,
        HAS_CLIP=clips.projection is not None, BLOCK_N=BLOCK_ROWS, BLOCK_P=BLOCK_CELLS, BLOCK_K=BLOCK_REDUCE,
    )
    return out_h, cell


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def fused_layer(
    inputs: Tensor, plan: PackingPlan, weights: LayerWeights, clips: Clips, state: Optional[LstmState] = None,
) -> Tuple[Tensor, LstmState]:
    """One layer in prediction through :func:`fused_step`, as :func:`~.cell.reference_layer` computes it.

    :param inputs: *Shape:* ``(k, n_rows, P)``, packed as `plan` says.
    """
    weights = LayerWeights(*(w.contiguous() for w in (weights.input, weights.hidden, weights.bias, weights.projection)))
    gate_inputs = torch.baddbmm(weights.bias.unsqueeze(1), inputs, weights.input)
    outputs = inputs.new_empty((inputs.shape[0], plan.n_rows, weights.projection.shape[2]))
    finished: List[LstmState] = []
    sizes = plan.batch_sizes
    steps: Iterable[Tuple[int, int]] = zip(sizes, plan.offsets)
    for t, (n, offset) in enumerate(steps):
        step_state = None if state is None else (state[0][:, :n], state[1][:, :n])
        state = fused_step(
            gate_inputs[:, offset : offset + n], step_state, weights, clips, outputs[:, offset : offset + n]
        )
        n_next = sizes[t + 1] if t + 1 < len(sizes) else 0
        if n_next < n:  # sequences n_next .. n-1 end at this step
            finished.append((state[0][:, n_next:], state[1][:, n_next:]))
    finished.reverse()
    final = (torch.cat([h for h, _ in finished], dim=1), torch.cat([c for _, c in finished], dim=1))
    return outputs, final
