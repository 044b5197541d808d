"""Read and write the published bilm-tf/AllenNLP format: `options.json` + `weights.hdf5`;
a model format of :mod:`.formats`, the one that claims every path no other claims.

Every conversion is a pure re-arrangement (transpose, permutation, slicing), so a
loaded-then-saved model has bit-identical datasets.
"""
import json
import math
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Type, Union

import numpy
import torch

from ...download import MAX_BYTES
from ...errors import OptionsError, WeightsError, one_line
from ...input_files import check_regular_file, read_regular_file
from ...output_files import HDF5_OVERHEAD_BYTES, atomic_output_path
from .bilm import ElmoBiLM
from .char_ids import ByteIds
from .options import BiLMOptions

PathLike = Union[str, Path]

OPTIONS_NAME = "options.json"
WEIGHTS_NAME = "weights.hdf5"

# Datasets under these names belong to the biLM (a file may hold others, e.g. a softmax).
_MODEL_GROUPS = ("char_embed", "CNN", "RNN_")
# Column blocks: the files hold i, j, f, o; the model keeps i, f, o, j.
_FILE_TO_MODEL_GATES = (0, 2, 3, 1)
_MODEL_TO_FILE_GATES = (0, 3, 1, 2)

#: The most parameters a biLM read from files may have: four times the largest published
#: ELMo (`original`, and `original-5.5b` of the same shapes: 93.6M), 1.6 GB as float32.
#: It is checked on what the files declare, before anything is read: an options.json and
#: a weights.hdf5 of 29 KB together can declare a kernel of 75 GiB.
MAX_PARAMETERS = 400_000_000
NAME = "bilm-tf"
#: Pretraining writes and continues this format.
TRAINABLE = True
# A chunk may hold this many values more than its dataset (HDF5 decompresses whole chunks).
_CHUNK_SLACK = 1 << 20
# What a weights dataset that is not numbers holds, by numpy's dtype kind.
_NOT_NUMBERS = {"O": "strings", "S": "strings", "U": "strings", "V": "records (a compound type)"}


def read_options(path: PathLike, *, shown: Optional[str] = None) -> BiLMOptions:
    """The options in `path` (:func:`checked_options`). Messages name `shown` (default: the path)."""
    source = shown or str(path)
    return checked_options(read_json(path, source=source), source)


def checked_options(options: Any, source: str) -> BiLMOptions:
    """`options` as in `options.json` (a file's, a checkpoint's, a saved pipeline's):
    every value checked, and the biLM they describe at most :data:`MAX_PARAMETERS` large."""
    checked = BiLMOptions.from_dict(options, source=source)
    check_parameter_count(
        sum(math.prod(shape) for shape in expected_shapes(checked).values()), source,
        check="lstm.dim, lstm.projection_dim, char_cnn.filters and char_cnn.n_characters",
    )
    return checked


def read_json(path: PathLike, *, source: str) -> Any:
    """The JSON value in `path`; anything but a readable JSON file is one `OptionsError`."""
    data = read_regular_file(Path(path), max_bytes=MAX_BYTES[".json"], error=OptionsError, what="Options")
    try:
        text = data.decode("utf8")
    except UnicodeDecodeError as err:
        raise OptionsError(f"{source}: not UTF-8 text (byte {err.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise OptionsError(f"{source}: not valid JSON (line {err.lineno}: {err.msg})") from None
    except ValueError as err:  # an integer of more than 4,300 digits
        raise OptionsError(f"{source}: not valid JSON ({one_line(err).split(':')[0]})") from None
    except RecursionError:
        raise OptionsError(f"{source}: not valid JSON (nested too deeply)") from None


def check_parameter_count(
    n_parameters: int, source: str, *, check: str, counted: str = "", error: Type[Exception] = OptionsError
) -> None:
    """The one bound on a biLM's size, for every format and for pretraining: refuse a biLM of
    more than :data:`MAX_PARAMETERS` parameters (`counted`: what the count includes; `check`:
    the settings that make it so large)."""
    if n_parameters > MAX_PARAMETERS:
        raise error(
            f"{source}: describes a biLM of {n_parameters:,} parameters{counted}, more than the {MAX_PARAMETERS:,} "
            f"spacy-elmo loads (4 times the largest published ELMo); check {check}"
        )


def declared_values(dataset: Any) -> int:
    """How many values reading an HDF5 `dataset` may hold in memory: its own, or one
    chunk's when that is more (a resizable dataset's chunk may be larger than it)."""
    return max(dataset.size or 0, math.prod(dataset.chunks or ()))


def resolve_paths(
    weights: PathLike, options: Optional[PathLike] = None
) -> Tuple[Path, Path]:
    """Accept a model directory or an explicit weights file (+ options file).

    A directory must hold `options.json` and `weights.hdf5`, `lm_weights.hdf5` (bilm-tf's name), the one
    `*weights.hdf5` (the published models' names) or the only `.hdf5` file. A weights file looks for `options.json`
    beside it."""
    weights = Path(weights)
    if weights.is_dir():
        weights = _find_weights_file(weights)
    elif not weights.exists():
        raise WeightsError(f"Weights file not found: {weights}")
    options_path = Path(options) if options is not None else weights.parent / OPTIONS_NAME
    if not options_path.exists():
        raise OptionsError(
            f"Options file not found: {options_path} (pass the options.json that belongs "
            f"to {weights})"
        )
    return weights, options_path


def _find_weights_file(directory: Path) -> Path:
    for name in (WEIGHTS_NAME, "lm_weights.hdf5"):
        if (directory / name).exists():
            return directory / name
    for pattern in ("*weights.hdf5", "*.hdf5"):
        candidates = sorted(directory.glob(pattern))
        if len(candidates) == 1:
            return candidates[0]
    found = ", ".join(c.name for c in sorted(directory.glob("*.hdf5"))) or "none"
    raise WeightsError(
        f"{directory}: cannot tell which file holds the weights (expected {WEIGHTS_NAME}; "
        f".hdf5 files found: {found}); pass the file itself"
    )


def expected_shapes(options: BiLMOptions) -> Dict[str, Tuple[int, ...]]:
    """Every dataset of the original format with the shape the options imply."""
    shapes: Dict[str, Tuple[int, ...]] = {
        "char_embed": (options.n_characters - 1, options.char_embedding_dim)
    }
    for i, (width, count) in enumerate(options.filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, options.char_embedding_dim, count)
        shapes[f"CNN/b_cnn_{i}"] = (count,)
    width = options.n_filters
    for k in range(options.n_highway):
        for name in ("carry", "transform"):
            shapes[f"CNN_high_{k}/W_{name}"] = (width, width)
            shapes[f"CNN_high_{k}/b_{name}"] = (width,)
    if options.has_char_projection:
        shapes["CNN_proj/W_proj"] = (width, options.projection_dim)
        shapes["CNN_proj/b_proj"] = (options.projection_dim,)
    hidden, proj = options.lstm_dim, options.projection_dim
    for direction in range(2):
        for layer in range(options.n_layers):
            prefix = _lstm_prefix(direction, layer)
            shapes[f"{prefix}/W_0"] = (proj + proj, 4 * hidden)
            shapes[f"{prefix}/B"] = (4 * hidden,)
            shapes[f"{prefix}/W_P_0"] = (hidden, proj)
    return shapes


def load_bilm(weights: PathLike, options: Optional[PathLike] = None) -> ElmoBiLM:
    """Build an :class:`ElmoBiLM` from an original-format model.

    :param weights: the `.hdf5` file or a directory holding it and `options.json`.
    :param options: the `options.json`, when it is not beside the weights.
    """
    weights_path, options_path = resolve_paths(weights, options)
    bilm_options = read_options(options_path)
    arrays = read_hdf5_arrays(
        weights_path, expected_shapes(bilm_options), f"from {options_path}", refuse_others_under=_MODEL_GROUPS
    )
    bilm = ElmoBiLM(bilm_options)
    set_original_arrays(bilm, arrays)
    return bilm


def read_hdf5_arrays(
    path: PathLike, expected: Dict[str, Tuple[int, ...]], why: str, *, refuse_others_under: Tuple[str, ...] = ()
) -> Dict[str, numpy.ndarray]:
    """Read the datasets `expected` (name -> shape) as float32 arrays, checking every one before any is read.

    A missing, unreadable, non-finite or non-numeric dataset or a wrong shape raises `WeightsError` naming the file, the
    dataset (and both shapes); so does an unexpected dataset under `refuse_others_under` (a third LSTM layer when the
    options say two: the options do not describe the file). `why` says where the expected shapes come from."""
    import h5py

    check_regular_file(Path(path), WeightsError, "Weights")
    try:
        handle = h5py.File(path, "r")
    except OSError as err:
        raise WeightsError(f"{path}: not a readable HDF5 file ({err})") from None
    arrays = {}
    with handle:
        if refuse_others_under:
            names: list = []
            handle.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
            unused = [n for n in names if n.startswith(refuse_others_under) and n not in expected]
            if unused:
                more = f" and {len(unused) - 1} more" if len(unused) > 1 else ""
                raise WeightsError(
                    f"{path}: dataset '{unused[0]}'{more} is not part of the biLM {why} "
                    f"(do the options' lstm.n_layers, char_cnn.filters and char_cnn.n_highway match the file?)"
                )
        datasets = {name: _declared_dataset(handle, name, shape, path, why) for name, shape in expected.items()}
        for name, dataset in datasets.items():
            try:
                array = numpy.asarray(dataset[...], dtype=numpy.float32)
            except OSError as err:
                raise WeightsError(f"{path}: dataset '{name}' cannot be read ({err}); the file is damaged") from None
            if not numpy.isfinite(array).all():
                n_bad = int(array.size - numpy.isfinite(array).sum())
                raise WeightsError(
                    f"{path}: dataset '{name}' holds {n_bad} non-finite value(s) (NaN or inf); "
                    f"the file is damaged or comes from a diverged training run"
                )
            arrays[name] = array
    return arrays


def _declared_dataset(handle: Any, name: str, shape: Tuple[int, ...], path: PathLike, why: str) -> Any:
    """The dataset `name`, once what it declares (shape, type, chunks) fits `shape`."""
    dataset = _stored_dataset(handle, name, path)
    if dataset is None:
        raise WeightsError(f"{path}: missing dataset '{name}' (expected shape {shape} {why})")
    actual = tuple(dataset.shape or ())
    if actual != shape:
        raise WeightsError(f"{path}: dataset '{name}' has shape {actual}, but {why} it should be {shape}")
    kind = dataset.dtype.kind
    if kind not in "fiu":
        what = _NOT_NUMBERS.get(kind, f"{dataset.dtype.name} values")
        raise WeightsError(f"{path}: dataset '{name}' holds {what}, not numbers; the file is not biLM weights")
    if declared_values(dataset) > math.prod(shape) + _CHUNK_SLACK:
        raise WeightsError(
            f"{path}: dataset '{name}' declares chunks of {math.prod(dataset.chunks):,} values, far more "
            f"than its {math.prod(shape):,}; refused before reading it"
        )
    return dataset


def _stored_dataset(handle: Any, name: str, path: PathLike) -> Any:
    """The dataset `name` if the file holds it itself, None if there is none.

    A link (to another file or name), external storage or a virtual dataset raises `WeightsError` with the dataset's
    name: loading it would read whatever it points to, any local file included.
    """
    import h5py

    node = handle
    parts = name.split("/")
    for depth, part in enumerate(parts):
        link = node.get(part, getlink=True)
        if link is None:
            return None
        if not isinstance(link, h5py.HardLink):
            where = "/".join(parts[: depth + 1])
            raise WeightsError(
                f"{path}: '{where}' is a {type(link).__name__} to another place; "
                f"a weights file must hold its datasets itself"
            )
        node = node[part]
    if not isinstance(node, h5py.Dataset):
        return None
    if node.external:
        raise WeightsError(f"{path}: dataset '{name}' keeps its data in an outside file; refused")
    if node.is_virtual:
        raise WeightsError(f"{path}: dataset '{name}' is a virtual dataset (its data is in other files); refused")
    return node


def set_original_arrays(bilm: ElmoBiLM, arrays: Dict[str, numpy.ndarray]) -> None:
    """Copy original-format arrays (as from `weights.hdf5`) into the model."""
    options = bilm.options
    encoder, lstm = bilm.char_encoder, bilm.lstm
    t = torch.from_numpy
    with torch.no_grad():
        encoder.char_embedding[0].zero_()
        encoder.char_embedding[1:].copy_(t(arrays["char_embed"]))
        for i, conv in enumerate(encoder.convolutions):
            # (1, width, in, out) -> (out, in, width)
            conv.weight.copy_(t(arrays[f"CNN/W_cnn_{i}"][0]).permute(2, 1, 0))
            conv.bias.copy_(t(arrays[f"CNN/b_cnn_{i}"]))
        for k, (weight, bias) in enumerate(zip(encoder.highway_weights, encoder.highway_biases)):
            prefix = f"CNN_high_{k}"
            weight.copy_(torch.cat([t(arrays[f"{prefix}/W_transform"]), t(arrays[f"{prefix}/W_carry"])], 1))
            bias.copy_(torch.cat([t(arrays[f"{prefix}/b_transform"]), t(arrays[f"{prefix}/b_carry"])]))
        if encoder.projection is not None:
            encoder.projection.weight.copy_(t(arrays["CNN_proj/W_proj"]).T)
            encoder.projection.bias.copy_(t(arrays["CNN_proj/b_proj"]))
        proj = options.projection_dim
        for layer in range(options.n_layers):
            for direction in range(2):
                prefix = _lstm_prefix(direction, layer)
                kernel = permute_gates(t(arrays[f"{prefix}/W_0"]), _FILE_TO_MODEL_GATES)
                lstm.input_weights[layer][direction].copy_(kernel[:proj])
                lstm.hidden_weights[layer][direction].copy_(kernel[proj:])
                bias = permute_gates(t(arrays[f"{prefix}/B"]), _FILE_TO_MODEL_GATES)
                lstm.biases[layer][direction].copy_(bias)
                lstm.projections[layer][direction].copy_(t(arrays[f"{prefix}/W_P_0"]))


def original_arrays(bilm: ElmoBiLM) -> Dict[str, numpy.ndarray]:
    """The model's parameters as original-format arrays, float32."""
    options = bilm.options
    encoder, lstm = bilm.char_encoder, bilm.lstm
    arrays: Dict[str, torch.Tensor] = {"char_embed": encoder.char_embedding[1:]}
    for i, conv in enumerate(encoder.convolutions):
        arrays[f"CNN/W_cnn_{i}"] = conv.weight.permute(2, 1, 0).unsqueeze(0)
        arrays[f"CNN/b_cnn_{i}"] = conv.bias
    width = options.n_filters
    for k, (weight, bias) in enumerate(zip(encoder.highway_weights, encoder.highway_biases)):
        prefix = f"CNN_high_{k}"
        arrays[f"{prefix}/W_transform"], arrays[f"{prefix}/W_carry"] = weight[:, :width], weight[:, width:]
        arrays[f"{prefix}/b_transform"], arrays[f"{prefix}/b_carry"] = bias[:width], bias[width:]
    if encoder.projection is not None:
        arrays["CNN_proj/W_proj"] = encoder.projection.weight.T
        arrays["CNN_proj/b_proj"] = encoder.projection.bias
    for layer in range(options.n_layers):
        for direction in range(2):
            prefix = _lstm_prefix(direction, layer)
            kernel = torch.cat(
                [lstm.input_weights[layer][direction], lstm.hidden_weights[layer][direction]]
            )
            arrays[f"{prefix}/W_0"] = permute_gates(kernel, _MODEL_TO_FILE_GATES)
            arrays[f"{prefix}/B"] = permute_gates(lstm.biases[layer][direction], _MODEL_TO_FILE_GATES)
            arrays[f"{prefix}/W_P_0"] = lstm.projections[layer][direction]
    return {
        name: numpy.ascontiguousarray(value.detach().to("cpu", torch.float32).numpy())
        for name, value in arrays.items()
    }


def save_bilm(bilm: ElmoBiLM, directory: PathLike) -> Tuple[Path, Path]:
    """Write `options.json` and `weights.hdf5` into `directory` (created if needed).

    Both files are written to temporary names and renamed, so an interrupted save
    never leaves a half-written model.
    """
    import h5py

    if not isinstance(bilm.token_ids, ByteIds):
        raise WeightsError(
            "This biLM reads a character vocabulary (an ELMoForManyLangs model), not UTF-8 bytes: "
            "the bilm-tf format cannot hold it"
        )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    options_path, weights_path = directory / OPTIONS_NAME, directory / WEIGHTS_NAME
    arrays = original_arrays(bilm)
    size = sum(array.nbytes for array in arrays.values()) + HDF5_OVERHEAD_BYTES
    with atomic_output_path(weights_path, size=size) as tmp:
        with h5py.File(tmp, "w") as handle:
            for name, array in sorted(arrays.items()):
                handle.create_dataset(name, data=array)
    with atomic_output_path(options_path) as tmp:
        tmp.write_text(json.dumps(bilm.options.to_dict(), indent=2) + "\n", encoding="utf8")
    return options_path, weights_path


def _lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def permute_gates(tensor: torch.Tensor, order: Tuple[int, ...]) -> torch.Tensor:
    blocks = tensor.chunk(4, dim=-1)
    return torch.cat([blocks[i] for i in order], dim=-1)


def claims(path: PathLike) -> bool:
    """Every path: the last format tried (:func:`model_files` says what is missing)."""
    return True


#: The format's (weights file, options file) of a path, and its loader.
model_files = resolve_paths
load = load_bilm


def describe(bilm: ElmoBiLM) -> Optional[Dict[str, Any]]:
    """The skeleton of a biLM reading UTF-8 bytes: its options (None for another token ids')."""
    return bilm.options.to_dict() if isinstance(bilm.token_ids, ByteIds) else None


def rebuild(data: Dict[str, Any]) -> ElmoBiLM:
    """The skeleton :func:`describe` describes, its options checked as `options.json`'s are."""
    return ElmoBiLM(checked_options(data, "the serialized elmo model"))
