"""Stacked LSTMs with projection and clipping, both directions in one recurrence.

Sequences arrive *packed*: time-major, rows sorted by length (longest first), so
step ``t`` owns the contiguous rows ``offsets[t] : offsets[t] + batch_sizes[t]``
and no work is spent on padding. Direction 0 reads each sequence forwards,
direction 1 reads it reversed; both share the packing plan.
"""
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from .direction_threads import run_directions_in_threads
from .lstm_policy import (
    first_layer_over_distinct_rows,
    threads_in_prediction,
    threads_in_training,
    trains_through_recurrence,
)
from .lstm_recurrence import RecurrenceSpec, lstm_recurrence
from .options import BiLMOptions
from .int8_linear import Int8Weights
from .packed_linear import PackedWeights
from .select_rows import select_rows

#: ``(h, c)`` for one layer, *Shape:* ``(2, batch, projection_dim)`` and
#: ``(2, batch, lstm_dim)``; index 0 is the forward direction.
LstmState = Tuple[Tensor, Tensor]

# Rows of the input projection computed in one matrix multiply; bounds the memory
# of the precomputed gate inputs on long inputs while keeping the GEMM efficient.
_INPUT_CHUNK_ROWS = 2048


@dataclass(frozen=True)
class PackingPlan:
    """How many sequences are still running at each step, and where each step starts."""

    batch_sizes: Tuple[int, ...]
    offsets: Tuple[int, ...]

    @classmethod
    def from_sorted_lengths(cls, lengths: Sequence[int]) -> "PackingPlan":
        """:param lengths: number of steps per sequence, longest first."""
        n_steps = lengths[0] if lengths else 0
        batch_sizes, offsets, n, total = [], [], len(lengths), 0
        for t in range(n_steps):
            while lengths[n - 1] <= t:
                n -= 1
            batch_sizes.append(n)
            offsets.append(total)
            total += n
        return cls(tuple(batch_sizes), tuple(offsets))


@dataclass(frozen=True)
class DistinctInputs:
    """The first layer's inputs as rows of a table: ``inputs[d] == vectors[index[d]]``.

    ``vectors``: *Shape:* ``(n_distinct, projection_dim)``, one row per distinct
    token of the batch; ``index``: *Shape:* ``(2, n_rows)``. In prediction the
    first layer's gate inputs are computed once per distinct row (the boundary
    tokens of every sentence, the words that recur) and gathered for each step.
    """

    vectors: Tensor
    index: Tensor


class BiLstmStack(nn.Module):
    """L layers of forward and backward LSTMs with projection (TensorFlow's LSTMCell).

    Gate blocks are kept in the order ``i, f, o, j`` (input, forget, output,
    candidate) so one sigmoid covers three of them; the original files use
    ``i, j, f, o`` and the conversion is a pure permutation.
    """

    def __init__(self, options: BiLMOptions) -> None:
        super().__init__()
        hidden, proj = options.lstm_dim, options.projection_dim
        self.cell_clip = options.cell_clip
        self.proj_clip = options.proj_clip
        self.use_skip_connections = options.use_skip_connections
        self.input_weights = nn.ParameterList(
            nn.Parameter(torch.zeros(2, proj, 4 * hidden)) for _ in range(options.n_layers)
        )
        self.hidden_weights = nn.ParameterList(
            nn.Parameter(torch.zeros(2, proj, 4 * hidden)) for _ in range(options.n_layers)
        )
        self.biases = nn.ParameterList(
            nn.Parameter(torch.zeros(2, 4 * hidden)) for _ in range(options.n_layers)
        )
        self.projections = nn.ParameterList(
            nn.Parameter(torch.zeros(2, hidden, proj)) for _ in range(options.n_layers)
        )
        # TensorFlow's LSTMCell adds forget_bias=1.0 at run time; it is not in `B`.
        forget_bias = torch.zeros(4 * hidden)
        forget_bias[hidden : 2 * hidden] = 1.0
        self.register_buffer("forget_bias", forget_bias, persistent=False)
        self.dropout = 0.0
        #: Run the two directions on two CPU threads (see :mod:`.lstm_policy`).
        self.parallel_directions = True
        self._packed = PackedWeights()
        #: "fp32", or "int8": CPU inference's products in int8 where faster (opt-in).
        self.precision = "fp32"
        self._int8 = Int8Weights()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for weights in (self.input_weights, self.hidden_weights, self.projections):
            for weight in weights:
                nn.init.normal_(weight, 0.0, (1.0 / weight.shape[1]) ** 0.5)
        for bias in self.biases:
            nn.init.zeros_(bias)

    @property
    def n_layers(self) -> int:
        return len(self.biases)

    def weights_changed(self) -> None:
        """Forget the prepacked weight copies (see :meth:`ElmoBiLM.weights_changed`)."""
        self._packed.clear()
        self._int8.clear()

    def set_dropout(self, rate: float) -> None:
        """Dropout on each layer's input in training mode; masks are drawn before
        the directions go to their threads, so seeded runs repeat exactly."""
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {rate}")
        self.dropout = rate

    def forward(
        self,
        inputs: Tensor,
        plan: PackingPlan,
        initial_state: Optional[Sequence[LstmState]] = None,
        distinct: Optional[DistinctInputs] = None,
    ) -> Tuple[List[Tensor], List[LstmState]]:
        """Run every layer over packed inputs.

        :param inputs: token vectors, *Shape:* ``(2, n_rows, projection_dim)``.
        :param plan: the packing plan shared by both directions.
        :param initial_state: per layer, the state of every sequence in sorted
            order; ``None`` starts from zeros.
        :param distinct: ``inputs`` as rows of a table, which prediction uses
            for the first layer's input product where that saves work.
        :returns: per layer the packed outputs (residual included), *Shape:*
            ``(2, n_rows, projection_dim)``, and per layer the final state of every
            sequence (after its last step), in sorted order.
        """
        masks = self._dropout_masks(inputs)
        # Training runs each layer as one autograd node.
        spec = (
            RecurrenceSpec(
                plan.batch_sizes, self.cell_clip, self.proj_clip,
                directions_in_threads=threads_in_training(inputs, self.parallel_directions),
            )
            if trains_through_recurrence(inputs, self.parameters()) else None
        )
        if distinct is not None and (
            masks is not None  # dropout changes the first layer's input
            or not first_layer_over_distinct_rows(
                inputs, self.parameters(), self.input_weights[0][0].numel(), distinct.vectors.shape[0],
                _INPUT_CHUNK_ROWS,
            )
        ):
            distinct = None
        step_weights = self.hidden_weights[0][0].numel() + self.projections[0][0].numel()
        if spec is not None or not threads_in_prediction(inputs, self.parallel_directions, step_weights):
            # One node per layer for both directions: in training, its forward
            # and backward run the directions on two threads (lstm_recurrence).
            return self._run_directions(inputs, plan, initial_state, slice(0, 2), masks, spec, distinct)

        def run(direction: int) -> Tuple[List[Tensor], List[LstmState]]:
            return self._run_directions(
                inputs[direction : direction + 1], plan,
                None if initial_state is None
                else [(h[direction : direction + 1], c[direction : direction + 1]) for h, c in initial_state],
                slice(direction, direction + 1),
                None if masks is None else [m[direction : direction + 1] for m in masks],
                spec,
                distinct,
            )

        forward, backward = run_directions_in_threads(run)
        outputs = [torch.cat(pair) for pair in zip(forward[0], backward[0])]
        states = [
            (torch.cat([fh, bh]), torch.cat([fc, bc]))
            for (fh, fc), (bh, bc) in zip(forward[1], backward[1])
        ]
        return outputs, states

    def _dropout_masks(self, inputs: Tensor) -> Optional[List[Tensor]]:
        """Per layer, the (scaled) dropout mask of its input, *Shape:* like ``inputs``.

        Drawn here, before the directions go to their threads, so that a seeded
        run draws the same masks every time.
        """
        if not (self.dropout and self.training):
            return None
        keep = 1.0 - self.dropout
        return [torch.empty_like(inputs).bernoulli_(keep).div_(keep) for _ in range(self.n_layers)]

    def _run_directions(
        self,
        inputs: Tensor,
        plan: PackingPlan,
        initial_state: Optional[Sequence[LstmState]],
        directions: slice,
        masks: Optional[List[Tensor]] = None,
        spec: Optional[RecurrenceSpec] = None,
        distinct: Optional[DistinctInputs] = None,
    ) -> Tuple[List[Tensor], List[LstmState]]:
        """All layers for the directions in `directions` (inputs ``(k, n_rows, P)``);
        each through :func:`lstm_recurrence` when `spec` is given, the first
        layer's input product over `distinct`'s table when given."""
        outputs: List[Tensor] = []
        final_states: List[LstmState] = []
        layer_input = inputs
        for layer in range(self.n_layers):
            if masks is not None:
                layer_input = layer_input * masks[layer]
            layer_state = None if initial_state is None else initial_state[layer]
            if spec is not None:
                hidden, state = self._run_recurrence(layer, layer_input, spec, layer_state, directions)
            else:
                hidden, state = self._run_layer(
                    layer, layer_input, plan, layer_state, directions, distinct if layer == 0 else None
                )
            if layer > 0 and self.use_skip_connections:
                hidden = hidden + layer_input
            outputs.append(hidden)
            final_states.append(state)
            layer_input = hidden
        return outputs, final_states

    def _run_recurrence(
        self, layer: int, inputs: Tensor, spec: RecurrenceSpec, state: Optional[LstmState], directions: slice,
    ) -> Tuple[Tensor, LstmState]:
        """:meth:`_run_layer` as one autograd node."""
        hidden, final_h, final_c = lstm_recurrence(
            spec, inputs, self.input_weights[layer][directions], self.hidden_weights[layer][directions],
            self.biases[layer][directions] + self.forget_bias, self.projections[layer][directions],
            *(state if state is not None else (None, None)),
        )
        return hidden, (final_h, final_c)

    def _run_layer(
        self,
        layer: int,
        inputs: Tensor,
        plan: PackingPlan,
        state: Optional[LstmState],
        directions: slice,
        distinct: Optional[DistinctInputs] = None,
    ) -> Tuple[Tensor, LstmState]:
        w_hidden = self.hidden_weights[layer][directions]
        w_proj = self.projections[layer][directions]
        hidden_size = w_proj.shape[1]
        h, c = state if state is not None else (None, None)
        steps: List[Tensor] = []
        finished_h: List[Tensor] = []
        finished_c: List[Tensor] = []
        n_steps = len(plan.batch_sizes)
        gate_inputs = self._gate_inputs(layer, inputs, plan, directions, distinct)
        for t, (n, gates) in enumerate(zip(plan.batch_sizes, gate_inputs)):
            if h is not None:
                gates = self._matmul(gates, h[:, :n], w_hidden, (layer, directions.start, 0), gates=True)
            sigmoid = torch.sigmoid(gates[:, :, : 3 * hidden_size])
            candidate = torch.tanh(gates[:, :, 3 * hidden_size :])
            input_gate = sigmoid[:, :, :hidden_size]
            forget_gate = sigmoid[:, :, hidden_size : 2 * hidden_size]
            output_gate = sigmoid[:, :, 2 * hidden_size :]
            new_c = input_gate * candidate
            if c is not None:
                new_c = torch.addcmul(new_c, forget_gate, c[:, :n])
            if self.cell_clip is not None:
                new_c = new_c.clamp(-self.cell_clip, self.cell_clip)
            new_h = self._matmul(None, output_gate * torch.tanh(new_c), w_proj, (layer, directions.start, 1))
            if self.proj_clip is not None:
                new_h = new_h.clamp(-self.proj_clip, self.proj_clip)
            steps.append(new_h)
            n_next = plan.batch_sizes[t + 1] if t + 1 < n_steps else 0
            if n_next < n:  # sequences n_next .. n-1 end at this step
                finished_h.append(new_h[:, n_next:])
                finished_c.append(new_c[:, n_next:])
            h, c = new_h, new_c
        finished_h.reverse()
        finished_c.reverse()
        return torch.cat(steps, dim=1), (torch.cat(finished_h, dim=1), torch.cat(finished_c, dim=1))

    def _matmul(
        self, add: Optional[Tensor], x: Tensor, weight: Tensor, key: Tuple[int, ...], *, gates: bool = False
    ) -> Tensor:
        """``add + x @ weight`` per direction, through prepacked weights when possible.

        ``add`` of shape ``(k, 1, out)`` is a bias, fused into the product. `gates`:
        a gate product (``P x 4H``), else the projection; the int8 path, where it is
        on, takes the products its kernels make faster.
        """
        if self.precision == "int8" and self._int8.kernel(x.shape[1], *weight.shape[1:], gates=gates):
            products = [
                self._int8.matmul(x[d], weight[d], (key[0], key[1] + d, key[2]), gates=gates)
                for d in range(x.shape[0])
            ]
            if all(p is not None for p in products):
                if add is not None and add.shape[1] == x.shape[1]:
                    # The step's gate inputs (a chunk's view or gathered rows), not read again: add in place.
                    for d, product in enumerate(products):
                        add[d].add_(product)
                    return add
                # One direction per thread (large weights): no copy into a stack.
                product = products[0].unsqueeze(0) if len(products) == 1 else torch.stack(products)
                return product if add is None else product.add_(add)
        if x.shape[0] == 1:
            is_row = add is not None and add.shape[1] == 1  # a bias: fuse it
            product = self._packed.matmul(
                x[0], weight[0], key, bias=add[0, 0] if is_row else None
            )
            if product is not None:
                product = product.unsqueeze(0)
                return product if add is None or is_row else add + product
        return _affine(add, x, weight)

    def _gate_inputs(
        self, layer: int, inputs: Tensor, plan: PackingPlan, directions: slice, distinct: Optional[DistinctInputs]
    ) -> Iterator[Tensor]:
        """Each step's input product plus bias, *Shape:* ``(k, batch_sizes[t], 4H)``:
        over `distinct`'s table when given, else over chunks of ``inputs``."""
        w_input = self.input_weights[layer][directions]
        bias = (self.biases[layer][directions] + self.forget_bias).unsqueeze(1)
        key = (layer, directions.start, 2)
        if distinct is None:
            return self._chunked_gate_inputs(inputs, plan, w_input, bias, key)
        k, n_distinct = w_input.shape[0], distinct.vectors.shape[0]
        # (k * n_distinct, 4H): direction d's rows from d * n_distinct.
        table = self._matmul(bias, distinct.vectors.expand(k, -1, -1), w_input, key, gates=True).flatten(0, 1)
        rows = distinct.index[directions] + n_distinct * torch.arange(k, device=inputs.device).unsqueeze(1)
        # Gathered per step: a chunk of gathered rows would be a fresh allocation of
        # up to k x 2048 x 4H floats, whose page faults cost more.
        return (
            select_rows(table, rows[:, offset : offset + n])
            for n, offset in zip(plan.batch_sizes, plan.offsets)
        )

    def _chunked_gate_inputs(
        self, inputs: Tensor, plan: PackingPlan, w_input: Tensor, bias: Tensor, key: Tuple[int, ...]
    ) -> Iterator[Tensor]:
        """The input product over chunks of ``inputs``, split into steps."""
        t = 0
        while t < len(plan.batch_sizes):
            offset = plan.offsets[t]
            end, chunk_steps = self._chunk_end(plan, t)
            chunk = self._matmul(bias, inputs[:, offset:end], w_input, key, gates=True)
            # Split once: a slice per step would make backward zero-fill a
            # chunk-sized gradient at every step (28% of a training step).
            yield from chunk.split(plan.batch_sizes[t : t + chunk_steps], dim=1)
            t += chunk_steps

    @staticmethod
    def _chunk_end(plan: PackingPlan, first_step: int) -> Tuple[int, int]:
        """End row and number of steps of the input-projection chunk at `first_step`."""
        start = plan.offsets[first_step]
        end, n_steps = start, 0
        for n in plan.batch_sizes[first_step:]:
            if end > start and end - start + n > _INPUT_CHUNK_ROWS:
                break
            end += n
            n_steps += 1
        return end, n_steps


def _affine(bias: Optional[Tensor], x: Tensor, weight: Tensor) -> Tensor:
    """``bias + x @ weight`` per direction; *Shape:* ``(k, rows, in) -> (k, rows, out)``.

    One direction goes through a plain matrix multiply (MKL's GEMV path at one
    row), two through a batched one.
    """
    if x.shape[0] == 1:
        if bias is None:
            return torch.mm(x[0], weight[0]).unsqueeze(0)
        return torch.addmm(bias[0], x[0], weight[0]).unsqueeze(0)
    if bias is None:
        return torch.bmm(x, weight)
    return torch.baddbmm(bias, x, weight)
