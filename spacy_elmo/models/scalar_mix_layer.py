"""ELMo's task-specific layer weighting as a Thinc layer.

The torch module is built once the number of layers is known: from ``n_layers``, from the biLM the listener is linked
to, or from the first batch it is initialized with.
"""
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy
import torch
from thinc.api import ArgsKwargs, Model, torch2xp, xp2torch
from thinc.types import Floats2d, Floats3d

from ..errors import SettingsError, is_finite_number, shown
from .deferred_shim import DeferredPyTorchShim
from .gradients import no_gradient
from .pytorch.scalar_mix import ScalarMix
from .types import ScalarMixModelT

#: The name of every scalar mix layer (``model.walk()`` finds them by it).
NAME = "elmo_scalar_mix"


def build_scalar_mix_v1(
    *,
    n_layers: Optional[int] = None,
    do_layer_norm: bool = False,
    initial_weights: Optional[Sequence[float]] = None,
    initial_gamma: float = 1.0,
    trainable: bool = True,
    dropout: float = 0.0,
    l2_penalty: float = 0.0,
) -> ScalarMixModelT:
    """A learned weighting of the biLM layers (Peters et al. 2018, eq. 1).

    n_layers (Optional[int]): L + 1 (3 for every published ELMo model); null
        takes it from the biLM.
    do_layer_norm (bool): normalise each layer before mixing. The statistics
        are taken per Doc, so a Doc's vectors do not depend on its batch.
    initial_weights (Optional[List[float]]): the initial, pre-softmax weights
        (zeros: the average of the layers).
    initial_gamma (float): the initial scale.
    trainable (bool): whether the weights and gamma are learned.
    dropout (float): dropout on the mixed vectors, in training.
    l2_penalty (float): adds ``l2_penalty * sum(s ** 2)`` to the loss of each
        batch, which keeps the mix close to the layer average (the paper's
        lambda; 0.001 in bilm-tf; ``ScalarMix.penalty``).

    *Input:* per Doc, *Shape:* ``(n_layers, n_tokens, width)``; *output:* per
    Doc, *Shape:* ``(n_tokens, width)``.
    """
    if n_layers is not None and (isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1):
        raise SettingsError(f"mixer.n_layers must be null or a positive number of layers, got {n_layers!r}")
    for name, value in (("initial_gamma", initial_gamma), ("dropout", dropout), ("l2_penalty", l2_penalty),
                        *(("initial_weights", w) for w in initial_weights or ())):
        if not is_finite_number(value):
            kind = "finite numbers" if name == "initial_weights" else "a finite number"
            raise SettingsError(f"mixer.{name} must be {kind}, got {shown(value)}")
    if l2_penalty < 0:
        raise SettingsError(f"l2_penalty must not be negative, got {l2_penalty}")
    if not 0 <= dropout < 1:
        raise SettingsError(f"mixer.dropout must be in [0, 1), got {dropout}")
    if initial_weights is not None and n_layers is not None:
        _check_initial_weights(initial_weights, n_layers, f"mixer.n_layers is {n_layers}")
    settings = {
        "do_layer_norm": do_layer_norm,
        "initial_weights": None if initial_weights is None else list(initial_weights),
        "initial_gamma": initial_gamma,
        "trainable": trainable,
        "dropout": dropout,
        "l2_penalty": l2_penalty,
    }
    # The penalty is a training setting of this config, not part of the saved
    # module: a deserialized mix takes it from here.
    build = partial(_build_mix, l2_penalty=l2_penalty)
    return Model(
        NAME,
        scalar_mix_forward,
        init=partial(init_scalar_mix, settings=settings),
        dims={"nL": n_layers, "nO": None},
        shims=[DeferredPyTorchShim(describe=_describe_mix, build=build)],
    )


def set_mix_dims(model: ScalarMixModelT, n_layers: int, width: int) -> None:
    """Tell the mix how many layers of which width it will read."""
    for name, value, what in (("nL", n_layers, "layers"), ("nO", width, "features per layer")):
        current = model.maybe_get_dim(name)
        if current is not None and current != value:
            raise SettingsError(
                f"The scalar mix was built for {current} {what}, but its biLM gives {value} "
                f"(n_layers in the mix config can be null: it then follows the biLM)"
            )
        model.set_dim(name, value)


def get_mix(model: ScalarMixModelT) -> Optional[ScalarMix]:
    """The torch scalar mix inside the layer, or None before initialize."""
    return model.shims[0].module


def find_mixes(model: Model) -> List[ScalarMixModelT]:
    """The initialized scalar mix layers in ``model``'s tree, in walk order."""
    return [node for node in model.walk() if node.name == NAME and get_mix(node) is not None]


def mix_parameters(model: ScalarMixModelT) -> Tuple[numpy.ndarray, float]:
    """The learned ``softmax(s)`` (*Shape:* ``(n_layers,)``) and ``gamma``."""
    mix = _require_mix(model)
    with torch.no_grad():
        weights = mix.normalized_weights().to("cpu", torch.float32).numpy()
    return weights, mix.gamma.item()


def init_scalar_mix(
    model: ScalarMixModelT,
    X: Optional[List[Floats3d]] = None,
    Y: Any = None,
    *,
    settings: Dict[str, Any],
) -> None:
    if X:
        set_mix_dims(model, X[0].shape[0], X[0].shape[2])
    n_layers = model.maybe_get_dim("nL")
    if n_layers is None:
        raise SettingsError(
            "The scalar mix does not know how many biLM layers to mix: link it to an "
            "initialized elmo component (a listener), or set n_layers"
        )
    if settings["initial_weights"] is not None:
        _check_initial_weights(settings["initial_weights"], n_layers, f"the biLM gives {n_layers} layers")
    model.shims[0].module = ScalarMix(n_layers, **settings)


def _check_initial_weights(initial_weights: Sequence[float], n_layers: int, expected: str) -> None:
    """One initial weight per layer mixed; `expected` says where ``n_layers`` came from."""
    if len(initial_weights) != n_layers:
        raise SettingsError(
            f"mixer.initial_weights {list(initial_weights)} has {len(initial_weights)} values, but {expected} "
            "(one weight per layer; null: equal weights)"
        )


def scalar_mix_forward(
    model: ScalarMixModelT, Xs: List[Floats3d], is_train: bool
) -> Tuple[List[Floats2d], Callable[[List[Floats2d]], List[Floats3d]]]:
    mix = _require_mix(model)
    ops = model.ops
    shim = model.shims[0]
    if not Xs:
        return [], no_gradient
    lengths = [X.shape[1] for X in Xs]
    offsets = _offsets(lengths)
    # All Docs in one pass; the layer norm still takes its statistics Doc by Doc.
    X = xp2torch(ops.xp.concatenate(Xs, axis=1), requires_grad=is_train, device=shim.device)
    inputs = ArgsKwargs(args=(X,), kwargs={"lengths": lengths})
    if not is_train:
        Y = torch2xp(shim.predict(inputs), ops=ops)
        return [ops.asarray2f(y) for y in ops.xp.split(Y, offsets, axis=0)], no_gradient
    Y_tensor, backprop_pass = shim(inputs, is_train)
    Y = torch2xp(Y_tensor, ops=ops)
    penalize = bool(mix.l2_penalty) and mix.weights.requires_grad

    def backprop(dYs: List[Floats2d]) -> List[Floats3d]:
        tensors = [Y_tensor]
        grads = [xp2torch(ops.asarray2f(ops.xp.concatenate(dYs, axis=0)), device=shim.device)]
        if penalize:
            # Once per batch: the penalty's gradient joins the weights'.
            tensors.append(mix.penalty())
            grads.append(torch.ones((), device=shim.device))
        d_args = backprop_pass(ArgsKwargs(args=(tuple(tensors),), kwargs={"grad_tensors": tuple(grads)}))
        dX = torch2xp(d_args.args[0], ops=ops)
        return [ops.asarray3f(d) for d in ops.xp.split(dX, offsets, axis=1)]

    return [ops.asarray2f(y) for y in ops.xp.split(Y, offsets, axis=0)], backprop


def _offsets(lengths: List[int]) -> List[int]:
    return numpy.cumsum(lengths)[:-1].tolist()


def _require_mix(model: ScalarMixModelT) -> ScalarMix:
    mix = get_mix(model)
    if mix is None:
        raise SettingsError("The scalar mix is not initialized yet (call nlp.initialize)")
    return mix


def _describe_mix(mix: ScalarMix) -> Dict[str, Any]:
    return {
        "n_layers": mix.n_layers,
        "do_layer_norm": mix.do_layer_norm,
        "layer_norm_eps": mix.layer_norm_eps,
        "trainable": mix.weights.requires_grad,
        "dropout": mix.dropout.p,
    }


def _build_mix(settings: Dict[str, Any], *, l2_penalty: float) -> ScalarMix:
    return ScalarMix(
        settings["n_layers"],
        do_layer_norm=settings["do_layer_norm"],
        layer_norm_eps=settings["layer_norm_eps"],
        trainable=settings["trainable"],
        dropout=settings["dropout"],
        l2_penalty=l2_penalty,
    )
