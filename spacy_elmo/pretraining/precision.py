"""The number format of training and evaluation: bfloat16 autocast or float32."""
from contextlib import nullcontext
from typing import ContextManager, Optional

import torch

TRAINING_PRECISIONS = ("auto", "bf16", "fp32")


def autocast_dtype(precision: str, device: torch.device) -> Optional[torch.dtype]:
    """bfloat16 for "bf16", and for "auto" on a GPU; None (float32) otherwise."""
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return None


def autocast(dtype: Optional[torch.dtype], device: torch.device) -> ContextManager:
    """Autocast to `dtype` on `device`; nothing for None."""
    if dtype is None:
        return nullcontext()
    return torch.autocast(device.type, dtype=dtype)
