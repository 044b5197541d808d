"""A check that the device's part of a step never makes the host wait for the device.

On a GPU, an op whose result's value or size the host must know (``.item()``,
``int(t)``, ``bool(t)``, ``nonzero``, ``unique``, indexing with a boolean mask,
``masked_select``, ``repeat_interleave`` without ``output_size``, ``torch.equal``) and
every copy back to the host wait until the GPU has run all it was given, so a step
takes host time plus GPU time. :func:`no_host_sync` fails on each of them:

- on ``"meta"``, a stand-in GPU that holds no values: the model and the inputs it
  copies there are meta tensors, the ops above on them fail, and copies back to the
  host are listed (they come back as zeros, so that what follows them still runs);
- on ``"cpu"`` (a training step, whose fused optimizer has no meta kernel): the ops
  above on any tensor fail, and so do ``tolist`` and ``numpy``, which torch's
  dispatch does not see; the host's part of the step must run before the check.
"""
import contextlib
from typing import Any, Iterator, List, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

# Ops whose result's value or size only the device knows.
_READS_VALUES = {
    "_local_scalar_dense", "item", "is_nonzero", "equal", "nonzero", "nonzero_numpy", "argwhere", "masked_select",
    "_unique", "_unique2", "unique_dim", "unique_consecutive", "unique_dim_consecutive",
}
_INDEXING = {"index", "index_put", "index_put_", "_index_put_impl_"}


class HostSync(AssertionError):
    """An op that would make the host wait for the device."""


class _NoHostSync(TorchDispatchMode):
    def __init__(self, device: str) -> None:
        super().__init__()
        self.device = device
        self.copies_back: List[torch.Size] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if any(t.device.type == self.device for t in tensors):
            reason = _synchronises(func, args, kwargs)
            if reason:
                raise HostSync(f"{func} synchronises the host with the device: {reason}")
            copied = self._copy_back(func, args, kwargs)
            if copied is not None:
                return copied
        return func(*args, **kwargs)

    def _copy_back(self, func, args, kwargs) -> Optional[torch.Tensor]:
        """A copy of a meta tensor to the host: listed, and zeros in its place."""
        name = func.overloadpacket.__name__
        if self.device != "meta" or name not in ("_to_copy", "to", "copy_"):
            return None
        source, rest = (args[1], [args[0]]) if name == "copy_" else (args[0], [*args[1:], *kwargs.values()])
        devices = [a.device if isinstance(a, torch.Tensor) else a for a in rest if isinstance(a, (torch.Tensor, torch.device))]
        if source.device.type != "meta" or not devices or devices[0].type != "cpu":
            return None
        self.copies_back.append(source.shape)
        if name == "copy_":
            return args[0].zero_()
        dtype = next((a for a in rest if isinstance(a, torch.dtype)), source.dtype)
        return torch.zeros(source.shape, dtype=dtype, device="cpu")


def _synchronises(func, args, kwargs) -> str:
    name = func.overloadpacket.__name__
    if name in _READS_VALUES:
        return "the host reads a value or a size only the device knows"
    if name == "repeat_interleave" and func._overloadname != "self_int" and kwargs.get("output_size") is None:
        return "repeat_interleave of tensor repeats without output_size"
    if name in _INDEXING and any(
        t is not None and t.dtype in (torch.bool, torch.uint8) for t in (args[1] if len(args) > 1 else [])
    ):
        return "a boolean mask as an index"
    return ""


@contextlib.contextmanager
def no_host_sync(device: str = "meta") -> Iterator[List[torch.Size]]:
    """Fail (:class:`HostSync`) on an op of the list above on `device`'s tensors; yields the
    shapes of the tensors copied back to the host (on ``"meta"``)."""
    mode = _NoHostSync(device)
    patched = {name: getattr(torch.Tensor, name) for name in ("tolist", "numpy")}

    def refuse(name: str):
        def method(tensor: torch.Tensor, *args: Any, **kwargs: Any):
            if tensor.device.type == device:
                raise HostSync(f"Tensor.{name} on {device}: the host reads what only the device knows")
            return patched[name](tensor, *args, **kwargs)
        return method

    for name in patched:
        setattr(torch.Tensor, name, refuse(name))
    try:
        with mode:
            yield mode.copies_back
    finally:
        for name, method in patched.items():
            setattr(torch.Tensor, name, method)
