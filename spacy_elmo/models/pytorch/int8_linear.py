"""The opt-in int8 path for CPU inference: the LSTM's products in int8.

Each weight is quantized once per output column (symmetric, int8) and prepacked
for PyTorch's quantized kernels, which quantize the activations per call (per
tensor) and multiply in int8: fbgemm with VNNI's dot products, and on CPUs with
AMX tiles also oneDNN, whose AMX kernel wins for large products. On AVX2 CPUs
without VNNI fbgemm multiplies pairs of bytes into 16 bits, which can saturate,
so the activations are quantized to 7 bits there (``reduce_range``).
Which kernel runs depends on the CPU and the product's size (:func:`choose_kernel`);
where fp32 is faster, it is kept.
"""
import threading
import warnings
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from ...errors import SettingsError

PRECISIONS = ("fp32", "int8")
#: fp32 below this many rows. On a 2-core AMD EPYC with AVX512-VNNI the gate product
#: of `english-compact` (``rows x 128 @ 128 x 2048``, both directions) takes 96 µs
#: instead of 180 at 20 rows, the same as fp32 at 3-8 rows.
MIN_ROWS = 8
#: With AMX, int8 only for weights of at least this many elements (the `original`
#: size's), at any number of rows and for the projection too: fbgemm below
#: `AMX_ONEDNN_ROWS` rows, oneDNN's AMX kernel from there. Measured on a 2-core
#: Intel Xeon (`benchmarks/bench_int8_products.py`), µs at 1 / 8 / 32 / 256 rows for
#: fp32, fbgemm and oneDNN: ``512 x 16384`` 634 / 860 / 2,413 / 13,688, 265 / 306 /
#: 638 / 11,611 and 304 / 413 / 455 / 1,220; ``4096 x 512`` 175 / 193 / 575 / 2,965,
#: 40 / 76 / 223 / 1,091 and 47 / 102 / 170 / 780. For `english-compact`'s ``128 x 2048`` the products alone favour int8
#: from 24 rows (oneDNN 142 µs at 256 rows against fp32's 464), but the component ran
#: faster with fp32 throughout (13,646 against 12,457 tokens/s with oneDNN for the
#: input products; fp32 products right after an AMX one were slower).
AMX_MIN_WEIGHTS = 1024 * 1024
AMX_ONEDNN_ROWS = 24
#: On AVX2 without VNNI, as with AMX, int8 only for weights of at least this many
#: elements (the `original` size's), at every row count, the projection too. Measured
#: on a 2-core AMD EPYC (Zen 3), one thread, four weights in turn, µs at 1 / 8 / 32
#: rows for fp32 (`mm` or prepacked, the faster) and fbgemm with 7-bit activations:
#: ``512 x 16384`` 2,010 / 6,707 / 12,038 and 667 / 1,280 / 5,050; ``4096 x 512`` 855 /
#: 1,532 / 3,099 and 96 / 365 / 1,295. `english-compact`'s gate products from 8 rows in
#: int8 ran its component at 0.90x fp32's tokens/s at batch 32 and 1.20x at batch 1
#: (medians of eight alternating rounds), and its vectors lie twice as far from fp32 as
#: with VNNI, so it stays in fp32.
AVX2_MIN_WEIGHTS = AMX_MIN_WEIGHTS

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


def choose_kernel(rows: int, n_in: int, n_out: int, *, cpu: str, gates: bool) -> Optional[str]:
    """The quantized engine for a ``(rows, n_in) @ (n_in, n_out)`` product (an
    LSTM gate product if `gates`, else the projection) on a CPU with the int8
    instructions `cpu` ("amx", "vnni" or "avx2", as :func:`int8_instructions` names them): "fbgemm", "onednn", or
    ``None`` where fp32 is faster."""
    if cpu == "amx":
        if n_in * n_out < AMX_MIN_WEIGHTS:
            return None
        return "onednn" if rows >= AMX_ONEDNN_ROWS else "fbgemm"
    if cpu == "avx2":
        return "fbgemm" if n_in * n_out >= AVX2_MIN_WEIGHTS else None
    return "fbgemm" if gates and rows >= MIN_ROWS else None


def check_precision(precision: str) -> None:
    """One clear line for a precision this machine cannot run."""
    if precision not in PRECISIONS:
        raise SettingsError(f"precision must be one of {', '.join(map(repr, PRECISIONS))}, got {precision!r}")
    if precision == "int8" and not int8_available():
        raise SettingsError(
            "precision 'int8' needs an x86 CPU with AVX2 (or AVX512-VNNI, AVX-VNNI, AMX) and PyTorch's "
            "x86 quantized engine; this machine has not both: use precision 'fp32'"
        )


class Int8Weights:
    """int8 copies of 2-D weights, rebuilt whenever a weight changes (inference only)."""

    def __init__(self) -> None:
        self._packed: Dict[Tuple[object, ...], Tuple[Tuple[int, int], object]] = {}
        self._cpu = int8_instructions()

    def kernel(self, rows: int, n_in: int, n_out: int, *, gates: bool) -> Optional[str]:
        """:func:`choose_kernel` for this CPU: ``None`` where the product stays fp32."""
        if self._cpu is None:
            return None
        return choose_kernel(rows, n_in, n_out, cpu=self._cpu, gates=gates)

    def matmul(self, x: Tensor, weight: Tensor, key: Tuple[int, ...], *, gates: bool = True) -> Optional[Tensor]:
        """``x @ weight`` (*Shape:* ``(rows, in) @ (in, out)``) in int8, or ``None``
        where the int8 path does not apply and the caller computes it in fp32.
        `gates`: an LSTM gate product, else the projection."""
        kernel = self.kernel(x.shape[0], *weight.shape, gates=gates)
        if (
            kernel is None
            or x.device.type != "cpu"
            or x.dtype != torch.float32
            or weight.is_inference()  # no version counter to watch
            or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))
        ):
            return None
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
