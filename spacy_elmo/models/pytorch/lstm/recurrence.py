"""One LSTM layer's recurrence as a single autograd node: what training runs.

Plain autograd records a dozen nodes per step and zero-fills full-size gradients; here the forward keeps the local
derivatives in packed buffers, and the backward forms each weight gradient in one matrix multiply over all rows.
Unlike ``clamp``'s backward, a clip multiplies the gradient by 0, so an infinite or NaN gradient there gives NaN.
"""
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ..devices import to_device
from .cell import Clips, LayerWeights, LstmState, PackingPlan
from .threads import run_directions_in_threads

#: One direction (``int``: its tensors lose the direction dimension) or several (``slice``).
Direction = Union[int, slice]


@dataclass(frozen=True)
class RecurrenceSpec:
    """What is fixed for one call: the packing (sequences running at each step), the
    clips, and whether two directions run on two threads (forward and backward)."""

    batch_sizes: Tuple[int, ...]
    cell_clip: Optional[float]
    proj_clip: Optional[float]
    directions_in_threads: bool = False


@dataclass
class _Trace:
    """Kept per step while in cache, so the backward needs no elementwise pass; *Shape:* ``(k, n_rows, ·)``.

    ``factors`` (``4H``): per gate d(pre-activation)/d(product) ``j·i(1-i)``, ``c_prev·f(1-f)``, ``tanh(c)·o(1-o)``,
    ``i·(1-j²)``; ``forget``: ``f``; ``dcell``: ``o·(1 - tanh(c)²)``; ``cell_out``: ``o·tanh(c)``; ``hidden``: outputs;
    ``cell_inside``/``proj_inside`` (``None``: no clip): 1.0 where it passes the gradient, else 0.0 (bool is slower)."""

    factors: Tensor
    forget: Tensor
    dcell: Tensor
    cell_out: Tensor
    cell_inside: Optional[Tensor]
    proj_inside: Optional[Tensor]
    hidden: Tensor

    @classmethod
    def empty(cls, like: Tensor, k: int, n_rows: int, hidden_size: int, proj_size: int,
              spec: RecurrenceSpec) -> "_Trace":
        def new(width: int) -> Tensor:
            return like.new_empty((k, n_rows, width))

        return cls(
            factors=new(4 * hidden_size), forget=new(hidden_size), dcell=new(hidden_size),
            cell_out=new(hidden_size),
            cell_inside=new(hidden_size) if spec.cell_clip is not None else None,
            proj_inside=new(proj_size) if spec.proj_clip is not None else None,
            hidden=new(proj_size),
        )

    def directions(self, d: Direction) -> "_Trace":
        return _Trace(*(None if t is None else t[d] for t in self.tensors()))

    def tensors(self) -> List[Optional[Tensor]]:
        return [self.factors, self.forget, self.dcell, self.cell_out, self.cell_inside,
                self.proj_inside, self.hidden]


def lstm_recurrence(
    plan: PackingPlan,
    clips: Clips,
    inputs: Tensor,
    weights: LayerWeights,
    state: Optional[LstmState] = None,
    *,
    directions_in_threads: bool = False,
) -> Tuple[Tensor, LstmState]:
    """One layer for the ``k`` directions of `weights`, as :func:`~.cell.reference_layer` computes it.

    `inputs`: *Shape:* ``(k, n_rows, P)``, packed; `state`: every sequence's initial ``(h, c)`` in sorted order, or
    ``None`` (zeros); `directions_in_threads`: two directions on two CPU threads. Returns the outputs
    ``(k, n_rows, P)`` and every sequence's final ``(h, c)``, in sorted order."""
    spec = RecurrenceSpec(plan.batch_sizes, clips.cell, clips.projection, directions_in_threads)
    h0, c0 = state if state is not None else (None, None)
    hidden, final_h, final_c = _LstmRecurrence.apply(
        spec, inputs, weights.input, weights.hidden, weights.bias, weights.projection, h0, c0
    )
    return hidden, (final_h, final_c)


class _LstmRecurrence(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, spec: RecurrenceSpec, inputs: Tensor, w_input: Tensor, w_hidden: Tensor,
                bias: Tensor, w_proj: Tensor, h0: Optional[Tensor], c0: Optional[Tensor]):
        k, n_rows, proj_size = inputs.shape
        trace = _Trace.empty(inputs, k, n_rows, w_proj.shape[1], proj_size, spec)

        def run(d: Direction) -> Tuple[Tensor, Tensor]:
            return _forward_steps(
                spec, inputs[d], w_input[d], w_hidden[d], bias[d], w_proj[d],
                None if h0 is None else h0[d], None if c0 is None else c0[d], trace.directions(d),
            )

        final_h, final_c = _each_direction(run, k, spec.directions_in_threads)
        ctx.spec = spec
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(inputs, w_input, w_hidden, w_proj, h0, c0, *trace.tensors())
        return trace.hidden, final_h, final_c

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_hidden: Optional[Tensor], grad_final_h: Optional[Tensor],
                 grad_final_c: Optional[Tensor]):
        spec: RecurrenceSpec = ctx.spec
        inputs, w_input, w_hidden, w_proj, h0, c0, *saved = ctx.saved_tensors
        trace = _Trace(*saved)
        grads = _Grads.empty(inputs, w_input, w_hidden, w_proj, h0, c0, ctx.needs_input_grad[1:])
        if grad_hidden is None and grad_final_h is None and grad_final_c is None:
            return (None,) + tuple(None if g is None else g.zero_() for g in grads.tensors())

        def run(d: Direction) -> None:
            _backward_steps(
                spec, inputs[d], w_input[d], w_hidden[d], w_proj[d],
                None if h0 is None else h0[d], None if c0 is None else c0[d], trace.directions(d),
                *(None if g is None else g[d] for g in (grad_hidden, grad_final_h, grad_final_c)),
                grads.directions(d),
            )

        _each_direction(run, inputs.shape[0], spec.directions_in_threads)
        return (None,) + tuple(grads.tensors())


def _each_direction(run: Callable[[Direction], Any], k: int, in_threads: bool) -> Any:
    """`run` on one direction's tensors (2-D: no batched products), on two
    directions each on its own thread, or on all ``k`` at once."""
    if k == 2 and in_threads:
        results = run_directions_in_threads(run)
        if results[0] is None:
            return None
        return tuple(torch.stack(parts) for parts in zip(*results))
    if k != 1:
        return run(slice(0, k))
    result = run(0)
    return None if result is None else tuple(part.unsqueeze(0) for part in result)


@dataclass
class _Grads:
    """Gradients of the Function's tensor inputs, ``None`` where not needed."""

    inputs: Optional[Tensor]
    w_input: Optional[Tensor]
    w_hidden: Optional[Tensor]
    bias: Optional[Tensor]
    w_proj: Optional[Tensor]
    h0: Optional[Tensor]
    c0: Optional[Tensor]

    @classmethod
    def empty(cls, inputs: Tensor, w_input: Tensor, w_hidden: Tensor, w_proj: Tensor,
              h0: Optional[Tensor], c0: Optional[Tensor], needs: Sequence[bool]) -> "_Grads":
        k, _, width = w_input.shape
        likes = (inputs, w_input, w_hidden, w_input.new_empty((k, width)), w_proj, h0, c0)
        return cls(*(
            torch.empty_like(like) if like is not None and need else None
            for like, need in zip(likes, needs)
        ))

    def directions(self, d: Direction) -> "_Grads":
        return _Grads(*(None if t is None else t[d] for t in self.tensors()))

    def tensors(self) -> List[Optional[Tensor]]:
        return [self.inputs, self.w_input, self.w_hidden, self.bias, self.w_proj, self.h0, self.c0]


# The step functions below take one direction's tensors, ``(n_rows, ·)``, or several,
# ``(k, n_rows, ·)``: rows are dimension -2.


def _forward_steps(
    spec: RecurrenceSpec, x: Tensor, w_input: Tensor, w_hidden: Tensor, bias: Tensor,
    w_proj: Tensor, h0: Optional[Tensor], c0: Optional[Tensor], trace: _Trace,
) -> Tuple[Tensor, Tensor]:
    """Fill `trace`; return the final ``h``, ``c`` of every sequence."""
    hidden_size = w_proj.shape[-2]
    sizes = spec.batch_sizes
    # Pre-activations, then activations, then (step by step) the factors. The bias
    # is added step by step, in cache: broadcast into all rows it costs as much as the product.
    gates = _matmul(x, w_input, out=trace.factors)
    bias = bias.unsqueeze(-2)
    cell = x.new_empty(x.shape[:-1] + (hidden_size,))
    # Every step's views, made in a few calls rather than a few per step.
    steps = zip(*(_steps(t, sizes) for t in (
        gates, *gates.split(hidden_size, dim=-1), gates[..., : 3 * hidden_size],
        cell, trace.hidden, trace.cell_out, trace.dcell, trace.forget, trace.cell_inside, trace.proj_inside,
    )))
    finished_h: List[Tensor] = []
    finished_c: List[Tensor] = []
    h_prev = None if h0 is None else h0.narrow(-2, 0, sizes[0])
    c_prev = None if c0 is None else c0.narrow(-2, 0, sizes[0])
    for t, (step_gates, i, f, o, j, sigmoid_gates, c, h, m, dcell, forget, cell_inside, proj_inside) in enumerate(
        steps
    ):
        n = sizes[t]
        step_gates.add_(bias)
        if h_prev is not None:
            _add_matmul_(step_gates, h_prev, w_hidden)
        sigmoid_gates.sigmoid_()
        j.tanh_()
        c_out = None if spec.cell_clip is not None else c
        i_j = torch.mul(i, j, out=c_out if c_prev is None else None)
        c_in = i_j if c_prev is None else torch.addcmul(i_j, f, c_prev, out=c_out)
        if cell_inside is not None:
            torch.clamp(c_in, -spec.cell_clip, spec.cell_clip, out=c)
            # clamp's backward passes the gradient where -clip <= c_in <= clip (not at NaN).
            torch.eq(c, c_in, out=cell_inside)
        tanh_c = torch.tanh(c)
        torch.mul(o, tanh_c, out=m)
        if proj_inside is not None:
            h_in = _matmul(m, w_proj)
            torch.clamp(h_in, -spec.proj_clip, spec.proj_clip, out=h)
            torch.eq(h, h_in, out=proj_inside)
        else:
            _matmul(m, w_proj, out=h)
        # The factors, in place over the activations, each from values still needed last.
        torch.addcmul(o, m, tanh_c, value=-1, out=dcell)  # o - o·tanh²
        torch.addcmul(m, m, o, value=-1, out=o)  # tanh·o(1-o)
        torch.addcmul(i, i_j, j, value=-1, out=j)  # i(1-j²)
        torch.addcmul(i_j, i_j, i, value=-1, out=i)  # j·i(1-i)
        forget.copy_(f)
        if c_prev is not None:
            torch.addcmul(f, f, f, value=-1, out=f).mul_(c_prev)
        else:
            f.zero_()
        n_next = sizes[t + 1] if t + 1 < len(sizes) else 0
        if n_next < n:  # sequences n_next .. n-1 end at this step
            finished_h.append(h.narrow(-2, n_next, n - n_next))
            finished_c.append(c.narrow(-2, n_next, n - n_next))
        h_prev, c_prev = h.narrow(-2, 0, n_next), c.narrow(-2, 0, n_next)
    finished_h.reverse()
    finished_c.reverse()
    return torch.cat(finished_h, dim=-2), torch.cat(finished_c, dim=-2)


def _backward_steps(
    spec: RecurrenceSpec, x: Tensor, w_input: Tensor, w_hidden: Tensor, w_proj: Tensor,
    h0: Optional[Tensor], c0: Optional[Tensor], trace: _Trace, grad_hidden: Optional[Tensor],
    grad_final_h: Optional[Tensor], grad_final_c: Optional[Tensor], grads: _Grads,
) -> None:
    """Fill `grads` from the outputs' gradients (``None`` = zero)."""
    hidden_size = w_proj.shape[-2]
    sizes = spec.batch_sizes
    n_first = sizes[0]
    # Becomes d(projection input) step by step; each step adds d(h_prev) to the one before.
    d_proj = (
        grad_hidden.clone(memory_format=torch.contiguous_format) if grad_hidden is not None
        else torch.zeros_like(x)
    )
    d_carry_c = (  # d(c) of each running sequence, for the step being processed
        grad_final_c.clone(memory_format=torch.contiguous_format) if grad_final_c is not None
        else x.new_zeros(x.shape[:-2] + (n_first, hidden_size))
    )
    d_h0 = x.new_zeros(x.shape[:-2] + (n_first, x.shape[-1])) if h0 is not None else None
    d_gates = x.new_empty(x.shape[:-1] + (4 * hidden_size,))
    w_proj_t = w_proj.transpose(-1, -2)
    w_hidden_t = w_hidden.transpose(-1, -2)
    o_gate = slice(2 * hidden_size, 3 * hidden_size)
    # Every step's views, made in a few calls rather than a few per step.
    steps = list(zip(*(_steps(t, sizes) for t in (
        d_proj, d_gates, _per_gate(d_gates), d_gates[..., o_gate], _per_gate(trace.factors),
        trace.factors[..., o_gate], trace.dcell, trace.forget, trace.cell_inside, trace.proj_inside,
    ))))
    for t in range(len(sizes) - 1, -1, -1):
        d_h, step_d_gates, step_d_gates4, step_d_o, factors4, factor_o, dcell, forget, cell_inside, proj_inside = (
            steps[t]
        )
        n = sizes[t]
        n_next = sizes[t + 1] if t + 1 < len(sizes) else 0
        if grad_final_h is not None and n_next < n:
            d_h.narrow(-2, n_next, n - n_next).add_(grad_final_h.narrow(-2, n_next, n - n_next))
        if proj_inside is not None:
            d_h.mul_(proj_inside)
        d_m = _matmul(d_h, w_proj_t)
        d_c = d_carry_c.narrow(-2, 0, n)
        d_c.addcmul_(d_m, dcell)
        if cell_inside is not None:
            d_c.mul_(cell_inside)
        torch.mul(d_c.unsqueeze(-3), factors4, out=step_d_gates4)
        torch.mul(d_m, factor_o, out=step_d_o)
        if t > 0 or d_h0 is not None:
            d_c.mul_(forget)
            d_h_prev = steps[t - 1][0] if t > 0 else d_h0
            _add_matmul_(d_h_prev.narrow(-2, 0, n), step_d_gates, w_hidden_t)
    if grads.inputs is not None:
        _matmul(d_gates, w_input.transpose(-1, -2), out=grads.inputs)
    if grads.w_input is not None or grads.w_hidden is not None or grads.bias is not None:
        parts = gate_weight_grads(spec.batch_sizes, x, trace.hidden, h0, d_gates)
        for grad, part in zip((grads.w_input, grads.w_hidden, grads.bias), parts):
            if grad is not None:
                grad.copy_(part)
    if grads.w_proj is not None:
        _matmul(trace.cell_out.transpose(-1, -2), d_proj, out=grads.w_proj)
    if grads.h0 is not None and d_h0 is not None:
        grads.h0.zero_().narrow(-2, 0, n_first).copy_(d_h0)
    if grads.c0 is not None:
        grads.c0.zero_().narrow(-2, 0, n_first).copy_(d_carry_c.narrow(-2, 0, n_first))


def gate_weight_grads(
    batch_sizes: Sequence[int], x: Tensor, hidden: Tensor, h0: Optional[Tensor], d_gates: Tensor,
) -> Tuple[Tensor, Tensor, Tensor]:
    """The input, recurrent and bias gradients in one pass over `d_gates`:
    ``[x, h_prev, 1]^T d_gates``, ``h_prev`` zero (or ``h0``) at the first step.

    :param x: the layer's packed inputs, `hidden` its outputs, *Shape:* ``(..., n_rows, P)``.
    :returns: *Shape:* ``(..., P, 4H)``, ``(..., P, 4H)`` and ``(..., 4H)`` (views of one product).
    """
    proj_size = x.shape[-1]
    n_first = batch_sizes[0]
    rows_in = x.new_empty(x.shape[:-1] + (2 * proj_size + 1,))
    rows_in[..., :proj_size] = x
    previous = hidden.index_select(-2, _previous_rows(batch_sizes, x.device))
    rows_in[..., n_first:, proj_size:-1] = previous
    rows_in[..., :n_first, proj_size:-1] = 0.0 if h0 is None else h0.narrow(-2, 0, n_first)
    rows_in[..., -1] = 1.0
    product = _matmul(rows_in.transpose(-1, -2), d_gates)
    return product[..., :proj_size, :], product[..., proj_size:-1, :], product[..., -1, :]


def _steps(packed: Optional[Tensor], batch_sizes: Sequence[int]) -> Sequence[Optional[Tensor]]:
    """Each step's rows of `packed` (views), or ``None`` per step."""
    if packed is None:
        return [None] * len(batch_sizes)
    return packed.split(batch_sizes, dim=-2)


def _per_gate(gates: Tensor) -> Tensor:
    """*Shape:* ``(..., n_rows, 4H) -> (..., 4, n_rows, H)`` (a view)."""
    return gates.unflatten(-1, (4, gates.shape[-1] // 4)).transpose(-3, -2)


def _previous_rows(batch_sizes: Sequence[int], device: torch.device) -> Tensor:
    """For every packed row after the first step, the row of the same sequence one step
    earlier, *Shape:* ``(n_rows - batch_sizes[0],)`` (found on the host)."""
    sizes = numpy.asarray(batch_sizes, dtype=numpy.int32)
    index = numpy.arange(sizes[0], sizes.sum(), dtype=numpy.int32) - numpy.repeat(sizes[:-1], sizes[1:])
    return to_device(torch.from_numpy(index), device)


def _matmul(a: Tensor, b: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """``a @ b``, *Shape:* ``(m, n) @ (n, p)`` or per direction ``(k, m, n) @ (k, n, p)``."""
    if a.dim() == 2:
        return torch.mm(a, b, out=out)
    return torch.bmm(a, b, out=out)


def _add_matmul_(acc: Tensor, a: Tensor, b: Tensor) -> None:
    """``acc += a @ b`` in place."""
    if a.dim() == 2:
        acc.addmm_(a, b)
    else:
        acc.baddbmm_(a, b)
