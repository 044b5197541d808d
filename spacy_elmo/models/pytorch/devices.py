"""What the models need to know of a device: copies from the host that never make it wait, and autocast there.

The host prepares the next batch while the copy and the kernels that read it run in stream order.
"""
from contextlib import nullcontext
from typing import ContextManager, Optional, TypeVar, Union

import torch
from torch import Tensor

DeviceLike = Union[str, torch.device]
T = TypeVar("T", bound=Optional[Tensor])


def to_device(tensor: T, device: DeviceLike) -> T:
    """`tensor` (on the host) on `device`: pinned and non-blocking to a GPU, a plain copy elsewhere."""
    if tensor is None:
        return tensor
    target = torch.device(device)
    if tensor.device.type == "cpu" and target.type == "cuda":
        return tensor.pin_memory().to(target, non_blocking=True)  # type: ignore[return-value]
    return tensor.to(target)  # type: ignore[return-value]


def autocast_enabled(device_type: str) -> bool:
    """Whether autocast is on for `device_type` (never on a device without autocast, such as ``meta``)."""
    return torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type)


def autocast_off(device_type: str) -> ContextManager:
    """Autocast off for `device_type` (nothing to turn off on a device without autocast)."""
    return torch.autocast(device_type, enabled=False) if torch.amp.is_autocast_available(device_type) else nullcontext()
