"""The LSTM engine: L layers of forward and backward LSTMs with projection, one interface.

Training runs the recurrence, or the reference under autocast; prediction runs the prediction path, a thread per
direction from :data:`MIN_STEP_WEIGHTS_FOR_THREADS` (below, the GIL outweighs it).
"""
from typing import Callable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from ..devices import autocast_enabled
from ..options import BiLMOptions
from .cell import Clips, DistinctInputs, LayerWeights, LstmState, PackingPlan, reference_layer
from .prediction import FastProducts, prediction_layer
from .recurrence import lstm_recurrence
from .threads import run_directions_in_threads

PATHS = ("auto", "reference", "recurrence", "prediction")
#: In prediction, each direction on its own thread from this many weights per step (``P x 4H + H x P``).
MIN_STEP_WEIGHTS_FOR_THREADS = 2 * 1024 * 1024

#: ``run(key, inputs, weights, state, distinct) -> (outputs, final state)`` for the directions of
#: `weights`; ``key`` is ``(layer, first direction)``.
LayerRun = Callable[
    [Tuple[int, int], Tensor, LayerWeights, Optional[LstmState], Optional[DistinctInputs]], Tuple[Tensor, LstmState]
]


class BiLstmStack(nn.Module):
    """L layers of forward and backward LSTMs with projection (TensorFlow's LSTMCell)."""

    def __init__(self, options: BiLMOptions) -> None:
        super().__init__()
        hidden, proj = options.lstm_dim, options.projection_dim
        self.clips = Clips(options.cell_clip, options.proj_clip)
        self.use_skip_connections = options.use_skip_connections
        self.input_weights = nn.ParameterList(
            nn.Parameter(torch.zeros(2, proj, 4 * hidden)) for _ in range(options.n_layers)
        )
        self.hidden_weights = nn.ParameterList(
            nn.Parameter(torch.zeros(2, proj, 4 * hidden)) for _ in range(options.n_layers)
        )
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(2, 4 * hidden)) for _ in range(options.n_layers))
        self.projections = nn.ParameterList(
            nn.Parameter(torch.zeros(2, hidden, proj)) for _ in range(options.n_layers)
        )
        # TensorFlow's LSTMCell adds forget_bias=1.0 at run time; it is not in `B`.
        forget_bias = torch.zeros(4 * hidden)
        forget_bias[hidden : 2 * hidden] = 1.0
        self.register_buffer("forget_bias", forget_bias, persistent=False)
        self.dropout = 0.0
        #: Prediction's products, "fp32" or "int8" (:mod:`.int8_products`); set through
        #: :attr:`ElmoBiLM.precision`, which checks it.
        self.precision = "fp32"
        self._products = FastProducts()
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

    def layer_weights(self, layer: int) -> LayerWeights:
        """Layer `layer`'s weights for both directions, the forget gate's +1 in the bias."""
        return LayerWeights(
            self.input_weights[layer], self.hidden_weights[layer],
            self.biases[layer] + self.forget_bias, self.projections[layer],
        )

    def weights_changed(self) -> None:
        """Forget the prepacked weight copies (see :meth:`ElmoBiLM.weights_changed`)."""
        self._products.clear()

    def set_dropout(self, rate: float) -> None:
        """Dropout on each layer's input in training mode; masks are drawn before
        the directions go to their threads, so seeded runs repeat exactly."""
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {rate}")
        self.dropout = rate

    def choose_path(self, inputs: Tensor) -> str:
        """The path of the module's rule for this call."""
        needs_grad = torch.is_grad_enabled() and (
            inputs.requires_grad or any(p.requires_grad for p in self.parameters())
        )
        if not needs_grad:
            return "prediction"
        return "reference" if autocast_enabled(inputs.device.type) else "recurrence"

    def forward(
        self,
        inputs: Tensor,
        plan: PackingPlan,
        initial_state: Optional[Sequence[LstmState]] = None,
        distinct: Optional[DistinctInputs] = None,
        *,
        path: str = "auto",
    ) -> Tuple[List[Tensor], List[LstmState]]:
        """Run every layer over packed token vectors `inputs`, *Shape:* ``(2, n_rows, P)``.

        `initial_state`: per layer, every sequence's ``(h, c)`` in sorted order (``None``: zeros); `distinct`:
        ``inputs`` as table rows, for prediction's first layer; `path`: "auto" (the rule) or a path to force. Returns
        per layer the packed outputs (residual included), ``(2, n_rows, P)``, and every sequence's final state."""
        if path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, got {path!r}")
        path = self.choose_path(inputs) if path == "auto" else path
        masks = self._dropout_masks(inputs)
        run = self._layer_run(path, plan, inputs)
        if path != "prediction" or not self._directions_in_threads(inputs):
            return self._run_layers(run, inputs, initial_state, masks, distinct, slice(0, 2))

        def one_direction(d: int) -> Tuple[List[Tensor], List[LstmState]]:
            which = slice(d, d + 1)
            state = None if initial_state is None else [(h[which], c[which]) for h, c in initial_state]
            direction_masks = None if masks is None else [mask[which] for mask in masks]
            return self._run_layers(run, inputs[which], state, direction_masks, distinct, which)

        forward, backward = run_directions_in_threads(one_direction)
        outputs = [torch.cat(pair) for pair in zip(forward[0], backward[0])]
        states = [(torch.cat([fh, bh]), torch.cat([fc, bc])) for (fh, fc), (bh, bc) in zip(forward[1], backward[1])]
        return outputs, states

    def _layer_run(self, path: str, plan: PackingPlan, inputs: Tensor) -> LayerRun:
        """The function that runs one layer on `path` (a path of :data:`PATHS`, not "auto")."""
        if path == "reference":
            return lambda key, x, weights, state, distinct: reference_layer(x, plan, weights, self.clips, state)
        if path == "recurrence":
            in_threads = self._two_cpu_threads(inputs)
            return lambda key, x, weights, state, distinct: lstm_recurrence(
                plan, self.clips, x, weights, state, directions_in_threads=in_threads
            )
        return lambda key, x, weights, state, distinct: prediction_layer(
            self._products, key, x, plan, weights, self.clips, state, distinct, self.precision
        )

    def _run_layers(
        self,
        run: LayerRun,
        inputs: Tensor,
        initial_state: Optional[Sequence[LstmState]],
        masks: Optional[List[Tensor]],
        distinct: Optional[DistinctInputs],
        directions: slice,
    ) -> Tuple[List[Tensor], List[LstmState]]:
        """All layers for `directions` (inputs ``(k, n_rows, P)``)."""
        outputs: List[Tensor] = []
        final_states: List[LstmState] = []
        layer_input = inputs
        for layer in range(self.n_layers):
            if masks is not None:
                layer_input = layer_input * masks[layer]
            state = None if initial_state is None else initial_state[layer]
            weights = self.layer_weights(layer).directions(directions)
            hidden, final = run(
                (layer, directions.start), layer_input, weights, state,
                distinct if layer == 0 and masks is None else None,
            )
            if layer > 0 and self.use_skip_connections:
                hidden = hidden + layer_input
            outputs.append(hidden)
            final_states.append(final)
            layer_input = hidden
        return outputs, final_states

    def _dropout_masks(self, inputs: Tensor) -> Optional[List[Tensor]]:
        """Per layer, the (scaled) dropout mask of its input, *Shape:* like ``inputs``.

        Drawn here, before the directions go to their threads, so that a seeded
        run draws the same masks every time.
        """
        if not (self.dropout and self.training):
            return None
        keep = 1.0 - self.dropout
        return [torch.empty_like(inputs).bernoulli_(keep).div_(keep) for _ in range(self.n_layers)]

    def _directions_in_threads(self, inputs: Tensor) -> bool:
        step_weights = self.hidden_weights[0][0].numel() + self.projections[0][0].numel()
        return self._two_cpu_threads(inputs) and step_weights >= MIN_STEP_WEIGHTS_FOR_THREADS

    @staticmethod
    def _two_cpu_threads(inputs: Tensor) -> bool:
        return inputs.device.type == "cpu" and torch.get_num_threads() >= 2

