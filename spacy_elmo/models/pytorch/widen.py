"""A trained biLM grown to more LSTM cells or a wider projection, computing exactly
what it computed.

New cells get gate weights drawn as a new LSTM's are and a zero row in their layer's
projection; new projection dimensions get a zero row in the token projection and
zero columns in the LSTM projections, and the LSTM weights that read them are drawn
as a new LSTM's are. Either way the new parts run but nothing of them reaches the
outputs: the new dimensions of the layers are zero. In training the zero weights get
the gradient ``input x gradient of the output``, move off zero, and the new parts join
in. This gives a trained biLM more capacity without starting again from random weights
(`pretrain --init-from MODEL --model.lstm_dim N --model.projection_dim P`).
"""
import dataclasses
from typing import Callable, Sequence

import torch
from torch import Tensor

from .bilm import ElmoBiLM
from .options import BiLMOptions

#: Writes a trained parameter (name, its value) into the grown biLM's larger one.
GrowParameter = Callable[[str, Tensor, Tensor], None]


def widen_lstm(bilm: ElmoBiLM, lstm_dim: int) -> ElmoBiLM:
    """A copy of `bilm` with `lstm_dim` cells per LSTM layer and direction whose
    outputs are `bilm`'s. Seed torch first for the same new weights every time."""
    old = bilm.options.lstm_dim
    _refuse_narrowing("an LSTM", "cells", old, lstm_dim)

    def grow(name: str, value: Tensor, target: Tensor) -> None:
        if name.startswith(("lstm.input_weights.", "lstm.hidden_weights.", "lstm.biases.")):
            # (..., 4 * cells): the gate blocks i, f, o, j; the trained cells first in each.
            target.unflatten(-1, (4, lstm_dim))[..., :old] = value.unflatten(-1, (4, old))
        elif name.startswith("lstm.projections."):  # (2, cells, projection_dim)
            target.zero_()
            target[:, :old] = value
        else:
            target.copy_(value)

    return _grown(bilm, dataclasses.replace(bilm.options, lstm_dim=lstm_dim), grow)


def widen_projection(bilm: ElmoBiLM, projection_dim: int) -> ElmoBiLM:
    """A copy of `bilm` with `projection_dim`-wide token vectors and LSTM outputs whose
    layers are `bilm`'s with zeros appended to each direction's half: *Shape:*
    ``(..., 2 * projection_dim)``, ``[forward, 0, backward, 0]``. Seed torch first for
    the same new weights every time. A language model's softmax grows with it
    (:meth:`~spacy_elmo.pretraining.softmax.LMSoftmax.widened`).

    A biLM whose projection is as wide as its character CNN has no token projection
    (bilm-tf's rule); widened, it gets one that passes the CNN's output through, ``[I; 0]``.
    Widening to the CNN's width would drop the token projection, so it is refused."""
    old = bilm.options.projection_dim
    _refuse_narrowing("a projection", "dimensions", old, projection_dim)
    options = dataclasses.replace(bilm.options, projection_dim=projection_dim)
    if bilm.options.has_char_projection and not options.has_char_projection:
        raise ValueError(
            f"a projection of {projection_dim} dimensions, the width of the character CNN, has no token projection: "
            f"widening to it would change what the biLM computes"
        )
    gains_projection = options.has_char_projection and not bilm.options.has_char_projection
    added = ("char_encoder.projection.weight", "char_encoder.projection.bias") if gains_projection else ()
    wide = _grown(bilm, options, _grow_projection(old), added=added)
    if gains_projection:
        with torch.no_grad():
            wide.char_encoder.projection.weight.zero_()
            wide.char_encoder.projection.weight[:old].copy_(torch.eye(old))
            wide.char_encoder.projection.bias.zero_()
    return wide


def _grow_projection(old: int) -> GrowParameter:
    """Writes a parameter of a biLM with an `old`-dimensional projection into a wider one's."""

    def grow(name: str, value: Tensor, target: Tensor) -> None:
        if name.startswith("char_encoder.projection."):  # (projection_dim, filters), (projection_dim,)
            target.zero_()
            target[:old] = value
        elif name.startswith(("lstm.input_weights.", "lstm.hidden_weights.")):  # (2, projection_dim, 4 * cells)
            target[:, :old] = value
        elif name.startswith("lstm.projections."):  # (2, cells, projection_dim)
            target.zero_()
            target[..., :old] = value
        else:
            target.copy_(value)

    return grow


def _refuse_narrowing(what: str, unit: str, old: int, new: int) -> None:
    if new < old:
        raise ValueError(f"{what} of {old} {unit} can be widened, not narrowed to {new}")


def _grown(bilm: ElmoBiLM, options: BiLMOptions, grow: GrowParameter, *, added: Sequence[str] = ()) -> ElmoBiLM:
    """A new biLM of `options` with each of `bilm`'s parameters written into it by
    `grow`, and `bilm`'s settings (dropout, mode, device).
    `added`: the parameters only the new biLM has, which the caller sets."""
    parameter = bilm.lstm.biases[0]
    wide = ElmoBiLM(options).to(parameter.device, parameter.dtype)
    sources, targets = bilm.state_dict(), wide.state_dict()  # targets share storage with wide's parameters
    assert set(targets) - set(sources) == set(added), "a parameter of the grown biLM would stay random"
    with torch.no_grad():
        for name, value in sources.items():
            grow(name, value, targets[name])
    wide.set_dropout(bilm.lstm.dropout)
    return wide.train(bilm.training)
