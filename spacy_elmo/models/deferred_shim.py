"""A PyTorch shim whose module is built once its sizes are known.

The sizes come from the weights loaded at ``initialize``, so the shim starts empty; its bytes carry the module's
constructor settings with the state dict, so a model built from the config alone deserializes without the files.
"""
import hashlib
import io
from functools import partial
from typing import Any, Callable, Dict, Optional

import srsly
import torch
from thinc.api import ArgsKwargs, Optimizer, PyTorchShim
from thinc.shims.pytorch import default_serialize_torch_model
from thinc.util import get_torch_default_device

from ..errors import WeightsError
from .pytorch.state_dicts import read_state_dict

DescribeT = Callable[[torch.nn.Module], Dict[str, Any]]
BuildT = Callable[[Dict[str, Any]], torch.nn.Module]


class DeferredPyTorchShim(PyTorchShim):
    """A :class:`PyTorchShim` that starts without a module.

    ``describe(module)`` gives the settings ``build`` needs to construct an empty module of the same size when
    deserializing. Both must be picklable (module-level functions or partials of them).
    """

    def __init__(self, *, describe: DescribeT, build: BuildT) -> None:
        super().__init__(
            None,
            serialize_model=partial(_serialize, describe=describe),
            deserialize_model=partial(_deserialize, build=build),
        )

    def predict(self, inputs: ArgsKwargs) -> Any:
        """The module in eval mode under ``torch.inference_mode()``: Thinc's
        ``no_grad`` still tracks versions and views, which costs the LSTM's many
        small per-step operations about a quarter of their time."""
        self._model.eval()
        with torch.inference_mode(), torch.autocast(device_type="cuda", enabled=self._mixed_precision):
            return self._model(*inputs.args, **inputs.kwargs)

    def finish_update(self, optimizer: Optimizer) -> None:
        """Thinc's optimizer writes the new values into the parameters' memory,
        unseen by torch's version counters: the module's ``weights_changed()``,
        where it has one, drops what it derived from the old values."""
        super().finish_update(optimizer)
        weights_changed = getattr(self._model, "weights_changed", None)
        if weights_changed is not None:
            weights_changed()

    @property
    def module(self) -> Optional[torch.nn.Module]:
        """The wrapped module, or None before it was built or loaded.

        Thinc keeps it in ``Shim._model`` and has no public accessor for it (its
        own ``from_bytes`` reassigns the attribute), so this property is the one
        place that reads or writes it.
        """
        return self._model

    @module.setter
    def module(self, module: torch.nn.Module) -> None:
        """Put ``module`` in the shim, on the device of the current Thinc ops."""
        self._model = module.to(get_torch_default_device())


def _serialize(module: Optional[torch.nn.Module], *, describe: DescribeT) -> bytes:
    if module is None:
        return srsly.msgpack_dumps({"config": None, "state": b""})
    state = default_serialize_torch_model(module)
    return srsly.msgpack_dumps(
        {"config": describe(module), "state": state, "sha256": hashlib.sha256(state).hexdigest()}
    )


def _deserialize(
    module: Optional[torch.nn.Module], data: bytes, device: torch.device, *, build: BuildT
) -> Optional[torch.nn.Module]:
    """Build the module from its settings and load its state, refusing bytes that
    could run code (pickles: ``weights_only``), a damaged state (checksum, values
    that are not finite), and settings whose sizes the state does not have, before
    any memory of those sizes is allocated."""
    msg = srsly.msgpack_loads(data)
    if msg["config"] is None:
        return None
    state_bytes = msg["state"]
    checksum = msg.get("sha256")  # absent in pipelines saved before it was written
    if checksum is not None and hashlib.sha256(state_bytes).hexdigest() != checksum:
        raise WeightsError(f"{_WHOSE}: the weights do not match their checksum; the pipeline file is damaged")
    with torch.device("meta"):  # sizes only: nothing is allocated
        skeleton = build(msg["config"])
    shapes = {name: tuple(tensor.shape) for name, tensor in skeleton.state_dict().items()}
    state = read_state_dict(io.BytesIO(state_bytes), shapes, _WHOSE)
    module = build(msg["config"])
    module.load_state_dict(state)
    return module.to(device)


_WHOSE = "The serialized ELMo model"
