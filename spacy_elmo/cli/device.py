"""Which torch device a ``--gpu-id`` names."""
from typing import Optional

import torch

from ..errors import SpacyElmoError


def select_device(gpu_id: Optional[int] = None) -> torch.device:
    """The CPU for ``gpu_id`` None or negative, else CUDA device ``gpu_id``.

    Raises :class:`~spacy_elmo.errors.SpacyElmoError` naming ``--gpu-id`` when
    CUDA is not available or there is no such device.
    """
    if gpu_id is None or gpu_id < 0:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SpacyElmoError(f"--gpu-id {gpu_id}: CUDA is not available (use --gpu-id -1 for the CPU)")
    if gpu_id >= torch.cuda.device_count():
        raise SpacyElmoError(
            f"--gpu-id {gpu_id}: only {torch.cuda.device_count()} CUDA device(s) are visible"
        )
    return torch.device("cuda", gpu_id)
