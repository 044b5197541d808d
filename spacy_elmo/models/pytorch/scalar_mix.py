"""Task-specific weighting of the biLM layers: ``gamma * sum_j softmax(s)_j * h_j``."""
from typing import Any, Dict, Optional, Sequence

import torch
from torch import Tensor, nn


class ScalarMix(nn.Module):
    """Softmax-normalised layer weights, a scale, optional layer norm and dropout.

    ``weights`` (s): *Shape:* ``(n_layers,)``; ``gamma``: *Shape:* ``(1,)`` (as
    AllenNLP's, so that every parameter is an array an optimizer can update).

    :param n_layers: how many layers are mixed (L + 1 for ELMo).
    :param do_layer_norm: normalise each layer first, with one mean and variance
        over all unmasked positions and features of the batch (bilm-tf).
    :param initial_weights: the initial (pre-softmax) weights; zeros by default.
    :param trainable: whether weights and gamma receive gradients.
    :param dropout: dropout on the mixed output (AllenNLP's ``Elmo`` uses 0.5).
    :param layer_norm_eps: epsilon of the layer norm (1e-12 in bilm-tf).
    :param l2_penalty: the strength of :meth:`penalty` (the paper's lambda;
        0.001 in bilm-tf).
    """

    def __init__(
        self,
        n_layers: int,
        *,
        do_layer_norm: bool = False,
        initial_weights: Optional[Sequence[float]] = None,
        initial_gamma: float = 1.0,
        trainable: bool = True,
        dropout: float = 0.0,
        layer_norm_eps: float = 1e-12,
        l2_penalty: float = 0.0,
    ) -> None:
        super().__init__()
        if initial_weights is None:
            initial_weights = [0.0] * n_layers
        if len(initial_weights) != n_layers:
            raise ValueError(
                f"initial_weights has {len(initial_weights)} values, expected {n_layers}"
            )
        self.weights = nn.Parameter(torch.tensor(list(initial_weights), dtype=torch.float32), trainable)
        self.gamma = nn.Parameter(torch.tensor([float(initial_gamma)]), trainable)
        self.do_layer_norm = do_layer_norm
        self.layer_norm_eps = layer_norm_eps
        self.l2_penalty = l2_penalty
        self.dropout = nn.Dropout(dropout)

    @property
    def n_layers(self) -> int:
        return self.weights.shape[0]

    def normalized_weights(self) -> Tensor:
        """softmax(s), *Shape:* ``(n_layers,)``."""
        return torch.softmax(self.weights, dim=0)

    def penalty(self) -> Tensor:
        """``l2_penalty * sum(s ** 2)``, a term for the loss of each batch that keeps
        the mix close to the layer average. *Shape:* ``()``."""
        return self.l2_penalty * (self.weights**2).sum()

    def forward(
        self, layers: Tensor, mask: Optional[Tensor] = None, lengths: Optional[Sequence[int]] = None
    ) -> Tensor:
        """Mix `layers`, *Shape:* ``(n_layers, ..., width)``, into *Shape:* ``layers.shape[1:]``.

        `mask`: *Shape:* ``layers.shape[1:-1]``, True at real positions; layer norm only. `lengths`: sequences laid end
        to end, ``(n_layers, sum(lengths), width)``; the layer norm takes statistics per sequence, as if mixed alone.
        """
        if layers.shape[0] != self.n_layers:
            raise ValueError(f"expected {self.n_layers} layers, got {layers.shape[0]}")
        if self.do_layer_norm:
            if lengths is not None:
                layers = self._layer_norm_per_sequence(layers, lengths)
            else:
                layers = self._layer_norm(layers, mask)
        weights = self.normalized_weights().to(layers.dtype)
        mixed = torch.tensordot(weights, layers, dims=1)
        return self.dropout(self.gamma.to(layers.dtype) * mixed)

    def _layer_norm(self, layers: Tensor, mask: Optional[Tensor]) -> Tensor:
        if mask is None:
            mask = torch.ones(layers.shape[1:-1], dtype=torch.bool, device=layers.device)
        weight = mask.unsqueeze(-1).to(layers.dtype)
        count = weight.sum() * layers.shape[-1]
        reduce_dims = tuple(range(1, layers.dim()))
        mean = (layers * weight).sum(dim=reduce_dims, keepdim=True) / count
        variance = (((layers - mean) * weight) ** 2).sum(dim=reduce_dims, keepdim=True) / count
        return (layers - mean) / torch.sqrt(variance + self.layer_norm_eps)

    def _layer_norm_per_sequence(self, layers: Tensor, lengths: Sequence[int]) -> Tensor:
        """:meth:`_layer_norm` of each sequence in one pass over all of them;
        *Shape:* ``(n_layers, n_positions, width)``."""
        n_layers, n_positions, width = layers.shape
        if sum(lengths) != n_positions:
            raise ValueError(f"lengths add up to {sum(lengths)}, but layers have {n_positions} positions")
        sizes = torch.tensor(lengths, device=layers.device)
        # output_size: the host knows it, and without it a GPU hands the sum back (a synchronisation).
        sequence = torch.repeat_interleave(torch.arange(len(lengths), device=layers.device), sizes, output_size=n_positions)
        count = (sizes * width).clamp_min(1).to(layers.dtype)

        def per_sequence_mean(values: Tensor) -> Tensor:  # (L, n_positions, W) -> (L, n_positions, 1)
            sums = values.new_zeros(n_layers, len(lengths)).index_add_(1, sequence, values.sum(-1))
            return (sums / count)[:, sequence].unsqueeze(-1)

        centered = layers - per_sequence_mean(layers)
        variance = per_sequence_mean(centered**2)
        return centered / torch.sqrt(variance + self.layer_norm_eps)

    def _load_from_state_dict(self, state_dict: Dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        # State dicts saved when gamma was 0-d (before it had shape (1,)).
        gamma = state_dict.get(prefix + "gamma")
        if gamma is not None and gamma.dim() == 0:
            state_dict[prefix + "gamma"] = gamma.reshape(1)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
