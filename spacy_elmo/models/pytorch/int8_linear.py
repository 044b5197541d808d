"""The opt-in int8 path for CPU inference: the LSTM's gate products in int8.

Each weight is quantized once per output column (symmetric, int8) and prepacked
for PyTorch's x86 quantized engine (fbgemm), which quantizes the activations
per call (per tensor, 8-bit) and multiplies with VNNI's int8 dot products. On
a 2-core AMD EPYC with AVX512-VNNI the gate product of `english-compact`
(``rows x 128 @ 128 x 2048``, both directions) takes 96 µs instead of 180 at
20 rows; at fewer than `MIN_ROWS` rows, and for the narrow projection
(``512 x 128``), fp32 stays faster and is kept.
"""
import warnings
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from ...errors import SettingsError

PRECISIONS = ("fp32", "int8")
MIN_ROWS = 8


def int8_available() -> bool:
    """Whether this CPU has int8 dot-product instructions (AVX512-VNNI or AVX-VNNI)
    and this torch build has the x86 quantized engine."""
    is_vnni = getattr(torch.cpu, "_is_vnni_supported", None)
    engines = torch.backends.quantized.supported_engines
    return bool(is_vnni is not None and is_vnni()) and ("x86" in engines or "fbgemm" in engines)


def check_precision(precision: str) -> None:
    """One clear line for a precision this machine cannot run."""
    if precision not in PRECISIONS:
        raise SettingsError(f"precision must be one of {', '.join(map(repr, PRECISIONS))}, got {precision!r}")
    if precision == "int8" and not int8_available():
        raise SettingsError(
            "precision 'int8' needs a CPU with int8 dot-product instructions (AVX512-VNNI or AVX-VNNI) "
            "and PyTorch's x86 quantized engine; this machine has not both: use precision 'fp32'"
        )


class Int8Weights:
    """int8 copies of 2-D weights, rebuilt whenever a weight changes (inference only)."""

    def __init__(self) -> None:
        self._packed: Dict[Tuple[int, ...], Tuple[Tuple[int, int], object]] = {}

    def matmul(self, x: Tensor, weight: Tensor, key: Tuple[int, ...]) -> Optional[Tensor]:
        """``x @ weight`` (*Shape:* ``(rows, in) @ (in, out)``) in int8, or ``None``
        where the int8 path does not apply and the caller computes it in fp32."""
        if (
            x.shape[0] < MIN_ROWS
            or x.device.type != "cpu"
            or x.dtype != torch.float32
            or weight.is_inference()  # no version counter to watch
            or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))
        ):
            return None
        version = (weight._version, weight.data_ptr())
        cached = self._packed.get(key)
        if cached is None or cached[0] != version:
            cached = (version, _prepack(weight.detach()))
            self._packed[key] = cached
        # reduce_range=False: full 8-bit activations; VNNI accumulates in int32 without saturation.
        return torch.ops.quantized.linear_dynamic(x.contiguous(), cached[1], False)

    def clear(self) -> None:
        self._packed.clear()

    def __reduce__(self):
        # Prepacked weights cannot be pickled or deep-copied; a copy starts empty.
        return (Int8Weights, ())


def _prepack(weight: Tensor) -> object:
    """*Shape:* ``(in, out)`` -> fbgemm's packed ``(out, in)`` int8 matrix, one scale per column."""
    columns = weight.t().contiguous()
    scales = (columns.abs().amax(dim=1) / 127.0).clamp_min(1e-12).double()
    zero_points = torch.zeros(columns.shape[0], dtype=torch.long)
    with warnings.catch_warnings():  # quantized tensors are marked deprecated; the op is current
        warnings.simplefilter("ignore", UserWarning)
        quantized = torch.quantize_per_channel(columns, scales, zero_points, 0, torch.qint8)
    return torch.ops.quantized.linear_prepack(quantized, None)
