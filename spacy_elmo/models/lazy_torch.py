"""A PyTorch shim whose module is built once its sizes are known.

The biLM's size comes from the weights loaded at ``initialize`` and a scalar
mix's layer count from the biLM it listens to, so neither module can be built
when the pipeline is constructed from its config. The shim starts empty; its
bytes carry the module's constructor settings with the state dict, so a model
built from the config alone can be deserialized (``spacy.load``, ``from_disk``)
without the original files.
"""
from functools import partial
from typing import Any, Callable, Dict, Optional

import srsly
import torch
from thinc.api import PyTorchShim
from thinc.shims.pytorch import default_deserialize_torch_model, default_serialize_torch_model
from thinc.util import get_torch_default_device

DescribeT = Callable[[torch.nn.Module], Dict[str, Any]]
BuildT = Callable[[Dict[str, Any]], torch.nn.Module]


def lazy_pytorch_shim(*, describe: DescribeT, build: BuildT) -> PyTorchShim:
    """An empty shim; ``describe(module)`` gives the settings ``build`` needs.

    Both functions must be module-level (picklable) functions.
    """
    return _PyTorchShim(
        None,
        serialize_model=partial(_serialize, describe=describe),
        deserialize_model=partial(_deserialize, build=build),
    )


class _PyTorchShim(PyTorchShim):
    """Thinc's optimizers take arrays with at least one dimension; 0-d torch
    parameters (a scalar mix's gamma) are updated as 1-element vectors."""

    def finish_update(self, optimizer) -> None:
        scalars = [p for p in self._model.parameters() if p.dim() == 0]
        for param in scalars:
            _reshape_param(param, (1,))
        super().finish_update(optimizer)
        for param in scalars:
            _reshape_param(param, ())


def _reshape_param(param: torch.nn.Parameter, shape) -> None:
    grad = param.grad
    param.grad = None
    param.data = param.data.reshape(shape)
    if grad is not None:
        param.grad = grad.reshape(shape)


def get_module(shim: PyTorchShim) -> Optional[torch.nn.Module]:
    """The wrapped module, or None before it was built or loaded."""
    return shim._model


def set_module(shim: PyTorchShim, module: torch.nn.Module) -> None:
    """Put ``module`` in the shim, on the device of the current Thinc ops."""
    shim._model = module.to(get_torch_default_device())


def _serialize(module: Optional[torch.nn.Module], *, describe: DescribeT) -> bytes:
    if module is None:
        return srsly.msgpack_dumps({"config": None, "state": b""})
    return srsly.msgpack_dumps(
        {"config": describe(module), "state": default_serialize_torch_model(module)}
    )


def _deserialize(
    module: Optional[torch.nn.Module], data: bytes, device: torch.device, *, build: BuildT
) -> Optional[torch.nn.Module]:
    msg = srsly.msgpack_loads(data)
    if msg["config"] is None:
        return None
    return default_deserialize_torch_model(build(msg["config"]), msg["state"], device)
