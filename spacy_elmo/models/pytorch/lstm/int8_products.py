"""The opt-in int8 precision of CPU prediction: the LSTM's large products in int8.

Weights are quantized once per output column (symmetric), activations per call; weights under :data:`MIN_WEIGHTS`
elements stay fp32 (too short for int8 to pay). fbgemm, or oneDNN on AMX CPUs where timed faster (:mod:`.tuning`);
on AVX2 without VNNI the activations keep 7 bits, as fbgemm's 16-bit sums of byte pairs can saturate.
"""
import threading
import warnings
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from ....errors import SettingsError
from .tuning import fastest

#: What the ``precision`` setting of prediction accepts.
PREDICTION_PRECISIONS = ("fp32", "int8")
MIN_WEIGHTS = 1024 * 1024

_prepack_lock = threading.Lock()


def int8_instructions() -> Optional[str]:
    """This CPU's best int8 instructions that PyTorch's quantized kernels use:
    "amx", "vnni" (AVX512-VNNI or AVX-VNNI), "avx2" (AVX2, or AVX-512 without VNNI),
    or ``None`` (no x86 quantized engine, or an older CPU)."""
    engines = torch.backends.quantized.supported_engines
    if not ("x86" in engines or "fbgemm" in engines):
        return None
    is_vnni = getattr(torch.cpu, "_is_vnni_supported", None)
    if is_vnni is not None and is_vnni():
        return "amx" if amx_available() else "vnni"
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        return "avx2"
    return None


def int8_available() -> bool:
    """Whether this CPU and torch build can run the int8 path."""
    return int8_instructions() is not None


def amx_available() -> bool:
    """Whether this CPU has AMX tiles and torch has the oneDNN quantized engine."""
    is_amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return bool(is_amx is not None and is_amx()) and "onednn" in torch.backends.quantized.supported_engines


def check_precision(precision: str) -> None:
    """One clear line for a precision this machine cannot run."""
    if precision not in PREDICTION_PRECISIONS:
        raise SettingsError(
            f"precision must be one of {', '.join(map(repr, PREDICTION_PRECISIONS))}, got {precision!r}"
        )
    if precision == "int8" and not int8_available():
        raise SettingsError(
            "precision 'int8' needs an x86 CPU with AVX2 (or AVX512-VNNI, AVX-VNNI, AMX) and PyTorch's "
            "x86 quantized engine; this machine has not both: use precision 'fp32'"
        )


class Int8Weights:
    """int8 copies of 2-D weights, rebuilt whenever a weight changes (prediction only)."""

    def __init__(self) -> None:
        self._packed: Dict[Tuple[object, ...], Tuple[Tuple[int, int], object]] = {}
        self._cpu = int8_instructions()

    def applies(self, x: Tensor, weight: Tensor) -> bool:
        """Whether ``x @ weight`` runs in int8 (see the module's rule)."""
        return (
            self._cpu is not None
            and weight.numel() >= MIN_WEIGHTS
            and x.device.type == "cpu"
            and x.dtype == torch.float32
            and not weight.is_inference()  # no version counter to watch
            and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))
        )

    def matmul(self, x: Tensor, weight: Tensor, key: Tuple[object, ...]) -> Tensor:
        """``x @ weight`` in int8, *Shape:* ``(rows, in) @ (in, out)``; check :meth:`applies` first."""
        if self._cpu != "amx":
            return self._kernel_matmul("fbgemm", x, weight, key)
        rows = 1 << max(0, x.shape[0] - 1).bit_length()
        return fastest("int8_kernel", (tuple(weight.shape), rows), {
            kernel: (lambda kernel=kernel: self._kernel_matmul(kernel, x, weight, key))
            for kernel in ("fbgemm", "onednn")
        })

    def _kernel_matmul(self, kernel: str, x: Tensor, weight: Tensor, key: Tuple[object, ...]) -> Tensor:
        version = (weight._version, weight.data_ptr())
        cached = self._packed.get((kernel, *key))
        if cached is None or cached[0] != version:
            cached = (version, prepack(weight.detach(), kernel))
            self._packed[(kernel, *key)] = cached
        # VNNI and AMX accumulate in int32 without saturation: full 8-bit activations.
        reduce_range = self._cpu == "avx2"
        return torch.ops.quantized.linear_dynamic(x.contiguous(), cached[1], reduce_range)

    def clear(self) -> None:
        self._packed.clear()

    def __reduce__(self):
        # Prepacked weights cannot be pickled or deep-copied; a copy starts empty.
        return (Int8Weights, ())


def prepack(weight: Tensor, kernel: str) -> object:
    """*Shape:* ``(in, out)`` -> the kernel's packed ``(out, in)`` int8 matrix, one scale per column."""
    columns = weight.t().contiguous()
    scales = (columns.abs().amax(dim=1) / 127.0).clamp_min(1e-12).double()
    zero_points = torch.zeros(columns.shape[0], dtype=torch.long)
    engine = "x86" if kernel == "fbgemm" and "x86" in torch.backends.quantized.supported_engines else kernel
    # The packed matrix keeps its kernel; the engine setting is global, so it is set
    # only around the packing (direction threads may pack at the same time).
    with _prepack_lock, warnings.catch_warnings():  # quantized tensors are marked deprecated; the op is current
        warnings.simplefilter("ignore", UserWarning)
        quantized = torch.quantize_per_channel(columns, scales, zero_points, 0, torch.qint8)
        previous = torch.backends.quantized.engine
        torch.backends.quantized.engine = engine
        try:
            return torch.ops.quantized.linear_prepack(quantized, None)
        finally:
            torch.backends.quantized.engine = previous
