"""Reading a torch state dict from a file that may be damaged or hostile: no code runs
(``weights_only``), nothing inflates (``torch.save`` stores its records uncompressed,
so a compressed one is refused before it is read), and it must hold exactly the
expected tensors, of their shapes, dense and real with finite values, before a model
takes them."""
import math
import zipfile
from pathlib import Path
from typing import IO, Any, Dict, Optional, Tuple, Type, Union

import torch

from ...errors import WeightsError, one_line


def max_state_bytes(shapes: Dict[str, Tuple[int, ...]]) -> int:
    """The most a state dict of tensors of `shapes` takes: 8 bytes a value (float64) and 1 MB of pickle and padding."""
    return 8 * sum(math.prod(shape) for shape in shapes.values()) + (1 << 20)


def read_state_dict(source: Union[Path, IO[bytes]], shapes: Dict[str, Tuple[int, ...]], whose: str) -> Dict[str, torch.Tensor]:
    """The tensors of `source` (a file, or bytes as a stream) named and shaped as in
    `shapes`; anything else is one :class:`WeightsError` that starts with `whose`."""
    check_uncompressed(source, whose, max_bytes=max_state_bytes(shapes))
    try:
        state: Any = torch.load(source, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises assorted errors for bad or unsafe bytes
        raise WeightsError(f"{whose}: the weights cannot be read safely ({one_line(err, 300)})") from None
    check_state_dict(state, shapes, whose)
    return state


def check_state_dict(state: Any, shapes: Dict[str, Tuple[int, ...]], whose: str) -> None:
    """Raise one :class:`WeightsError` starting with `whose` unless `state` holds exactly
    the tensors of `shapes`, each dense, real and finite."""
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightsError(f"{whose}: the weights are not a state dict of tensors")
    missing = sorted(set(shapes) - set(state))
    unexpected = sorted(set(state) - set(shapes))
    if missing or unexpected:
        raise WeightsError(
            f"{whose}: its settings and weights disagree (missing {missing[:3]}, unexpected {unexpected[:3]})"
        )
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(shapes[name]):
            raise WeightsError(
                f"{whose}: '{name}' has shape {tuple(tensor.shape)}, but its settings say {tuple(shapes[name])}"
            )
        check_tensor(name, tensor, whose)
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise WeightsError(f"{whose}: '{name}' holds values that are not finite (NaN or inf); the file is damaged")


def check_tensor(name: str, tensor: torch.Tensor, whose: str) -> None:
    """Refuse a tensor that is not plain numbers: sparse or quantized, without data (on
    the meta device) or complex (copied into weights, its imaginary part would be dropped)."""
    kinds = {
        "sparse": tensor.layout != torch.strided, "quantized": tensor.is_quantized,
        "meta (no data)": tensor.is_meta, "complex": tensor.is_complex(),
    }
    found = [kind for kind, is_kind in kinds.items() if is_kind]
    if found:
        raise WeightsError(
            f"{whose}: '{name}' is a {found[0]} tensor, not dense real numbers; the file is damaged or not weights"
        )


def check_uncompressed(
    source: Union[Path, IO[bytes]], whose: str, *, max_bytes: Optional[int] = None, error: Type[Exception] = WeightsError
) -> None:
    """Refuse a torch zip file with a compressed record (a few KB could inflate to GBs) or
    whose records would take more than `max_bytes`; a file in torch's older layout (not a
    zip) holds its records as they are and passes."""
    try:
        with zipfile.ZipFile(source) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # not a zip: torch.load reads it, or says why not
    finally:
        if hasattr(source, "seek"):
            source.seek(0)
    for member in members:
        if member.compress_type != zipfile.ZIP_STORED:
            raise error(
                f"{whose}: its record {member.filename} is compressed, which torch.save never does; refused before reading"
            )
    total = sum(member.file_size for member in members)
    if max_bytes is not None and total > max_bytes:
        raise error(f"{whose}: its records take {total:,} bytes, more than the {max_bytes:,} its tensors need")
