"""A trained biLM's LSTM grown to more cells, computing exactly what it computed.

Each new cell gets gate weights drawn as a new LSTM's are and a zero row in its
layer's projection, so the cells run but nothing of them reaches the outputs. In
training the projection's new rows get the gradient ``cell output x gradient of
the projection``, move off zero, and the new cells join in. This gives a trained
biLM more capacity without starting again from random weights (`pretrain
--init-from MODEL --model.lstm_dim N`).
"""
import dataclasses

import torch

from .bilm import ElmoBiLM


def widen_lstm(bilm: ElmoBiLM, lstm_dim: int) -> ElmoBiLM:
    """A copy of `bilm` with `lstm_dim` cells per LSTM layer and direction whose
    outputs are `bilm`'s. Seed torch first for the same new weights every time."""
    old = bilm.options.lstm_dim
    if lstm_dim < old:
        raise ValueError(f"an LSTM of {old} cells can be widened, not narrowed to {lstm_dim}")
    parameter = bilm.lstm.biases[0]
    wide = ElmoBiLM(dataclasses.replace(bilm.options, lstm_dim=lstm_dim)).to(parameter.device, parameter.dtype)
    # Everything but the LSTM as it is (the LSTM's keys are grown below).
    missing, _ = wide.load_state_dict(
        {name: value for name, value in bilm.state_dict().items() if not name.startswith("lstm.")}, strict=False
    )
    assert all(name.startswith("lstm.") for name in missing), missing
    source, target = bilm.lstm, wide.lstm
    with torch.no_grad():
        for layer in range(source.n_layers):
            for name in ("input_weights", "hidden_weights", "biases"):
                # (..., 4 * cells): the gate blocks i, f, o, j; the trained cells first in each.
                grown = getattr(target, name)[layer].unflatten(-1, (4, lstm_dim))
                grown[..., :old] = getattr(source, name)[layer].unflatten(-1, (4, old))
            # (2, cells, projection_dim): the new cells' rows zero.
            target.projections[layer][:, :old] = source.projections[layer]
            target.projections[layer][:, old:] = 0.0
    wide.set_dropout(source.dropout)
    target.precision, target.parallel_directions = source.precision, source.parallel_directions
    return wide.train(bilm.training)
