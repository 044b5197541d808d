"""`spacy-elmo embed`: bulk biLM embeddings of a tokenised text file into HDF5.

The output is laid out like AllenNLP's former `allennlp elmo` command: one
dataset per input line, named by its 0-based index (`"0"`, `"1"`, ...), plus a
`sentence_to_index` dataset holding one JSON string that maps each sentence (the
stripped line) to its index string.
"""
import io
import itertools
import json
import re
import sys
import time
from pathlib import Path
from typing import BinaryIO, Dict, Iterator, List, Optional, Tuple

import numpy
import typer

from .app import app
from .device import select_device
from ..errors import InputError, SettingsError, SpacyElmoError
from ..messages import warn
from ..models.loaders import find_model, load_model
from ..models.pytorch.embedder import ElmoEmbedder, name_numbers
from ..models.pytorch.formats import format_of
from ..named_models import default_model
from ..output_files import (
    HDF5_OVERHEAD_BYTES, atomic_output_path, check_output_file, check_space, remove_stale_temp_files,
)
from ..sigterm import raise_if_terminated

SENTENCE_TO_INDEX = "sentence_to_index"
# Below this many lines a run takes seconds, and a progress bar is only noise.
PROGRESS_MIN_LINES = 500
STDIN = "-"


@app.command("embed")
def embed_command(
    input_path: Path = typer.Argument(
        ..., metavar="INPUT", help="UTF-8 text, one whitespace-tokenised sentence per line ('-': standard input)."
    ),
    output_path: Path = typer.Argument(
        ..., metavar="OUTPUT", help="HDF5 file to write (its directory is created)."
    ),
    weights: Optional[Path] = typer.Option(
        None, "--weights", "-w",
        help="The biLM: a weights .hdf5 file, a directory with options.json and weights.hdf5, an ELMoForManyLangs model folder, or a model name (english-compact, small, original, pubmed, elmoformanylangs-pt, ...: docs/models.md). Default: english-compact, shipped in the package.",
    ),
    options: Optional[Path] = typer.Option(
        None, "--options", help="options.json, if it is not beside the weights."
    ),
    batch_size: int = typer.Option(32, "--batch-size", "-b", min=1, help="Sentences per forward pass."),
    max_length: str = typer.Option(
        "auto", "--max-length", metavar="auto|N",
        help="Encode a line longer than this many tokens in spans of at most this many, each from a zero state (their vectors differ from an uncut run's). auto: as many as one line's encoding holds in 1 GiB of memory.",
    ),
    gpu_id: int = typer.Option(-1, "--gpu-id", "-g", help="CUDA device index; -1 runs on the CPU."),
    precision: str = typer.Option(
        "fp32", "--precision",
        help="fp32 (exact), or int8: the LSTM's products in int8 on an x86 CPU with AVX2 or VNNI, where faster (vectors differ slightly).",
    ),
    top: bool = typer.Option(False, "--top", help="Write only the top layer: (n_tokens, dim)."),
    average: bool = typer.Option(
        False, "--average", help="Write the mean of all layers: (n_tokens, dim)."
    ),
) -> None:
    """Embed every line of INPUT with an ELMo biLM and write the layers to OUTPUT.

    Each line becomes a float32 dataset named by its 0-based line index, of shape
    (n_layers, n_tokens, dim), or (n_tokens, dim) with --top or --average.
    """
    if top and average:
        raise SettingsError("give at most one of --top and --average")
    if options is not None and weights is None:
        raise SettingsError("--options names the options.json of --weights: give --weights with --options")
    fixed_length = _parse_max_length(max_length)
    text = InputText(input_path)
    weights_path, options_path, model_label = _locate(weights, options)
    check_output_file(output_path, inputs=(*text.paths, weights_path, options_path))
    remove_stale_temp_files(output_path.parent, [output_path.name])
    device = select_device(gpu_id)
    n_lines, n_tokens, empty_lines = _scan(text)
    bilm = load_model(weights_path, options_path)
    embedder = ElmoEmbedder(bilm, batch_size=batch_size, device=device, precision=precision, max_length=fixed_length)
    if empty_lines:
        dim = bilm.options.output_dim
        shape = (0, dim) if top or average else (bilm.options.n_output_layers, 0, dim)
        are = "is" if len(empty_lines) == 1 else "are"
        warn(f"{text.name}: {name_numbers(empty_lines, 'line')} {are} empty (written as empty datasets of shape {shape})")

    layers_written = 1 if top or average else bilm.options.n_output_layers
    check_space(output_path, _expected_size(text, n_lines, n_tokens * layers_written * bilm.options.output_dim))
    start = time.perf_counter()
    write_embeddings(text, output_path, embedder, n_lines=n_lines, top=top, average=average)
    seconds = time.perf_counter() - start
    # Unwrapped lines (wasabi would wrap them at 80 columns), easy to grep from logs.
    typer.secho(
        f"Wrote {output_path}: {n_lines} sentences, {n_tokens} tokens in {seconds:.2f} s "
        f"({n_tokens / max(seconds, 1e-9):,.0f} tokens/s), model {model_label}",
        fg=typer.colors.GREEN,
    )
    if embedder.cut:
        warn(embedder.describe_cut("line", "--max-length"))


class InputText:
    """INPUT: a file, or '-' for standard input (read once and kept, as INPUT is read twice)."""

    def __init__(self, path: Path) -> None:
        self.paths: Tuple[Path, ...] = ()
        self._data: Optional[bytes] = None
        if str(path) == STDIN:
            self.name, self._data = "<stdin>", sys.stdin.buffer.read()
        else:
            _check_input(path)
            self.name, self.paths = str(path), (path,)

    @property
    def size(self) -> int:
        return len(self._data) if self._data is not None else self.paths[0].stat().st_size

    def open(self) -> BinaryIO:
        return io.BytesIO(self._data) if self._data is not None else self.paths[0].open("rb")


def write_embeddings(
    text: InputText,
    output_path: Path,
    embedder: ElmoEmbedder,
    *,
    n_lines: int,
    top: bool = False,
    average: bool = False,
) -> None:
    """Stream INPUT through `embedder` into a new HDF5 file, one dataset per line (the
    lines cut into spans of ``embedder.max_length``: ``embedder.cut``).

    The file is written under a temporary name and renamed only when complete;
    before each dataset the space for it and the rest of the file is checked, so a
    full disk or a file-size limit stops the command with one line and the previous
    OUTPUT, if any, stays as it was.
    """
    import h5py
    from tqdm import tqdm

    numbered, for_tokens = itertools.tee(_read_lines(text))
    layers_per_line = embedder.embed((line.split() for _, line in for_tokens), warn=False)
    sentence_to_index: Dict[str, str] = {}
    interactive = sys.stderr.isatty()
    progress = tqdm(
        total=n_lines, unit="sent", file=sys.stderr, disable=n_lines < PROGRESS_MIN_LINES,
        mininterval=0.1 if interactive else 30.0, dynamic_ncols=interactive,
    )
    # What the file still needs after the last dataset: the sentence index and HDF5's bookkeeping.
    closing_bytes = text.size + n_lines * _DATASET_BYTES + HDF5_OVERHEAD_BYTES
    with progress, atomic_output_path(output_path) as tmp, h5py.File(tmp, "w") as handle:
        for index, ((number, line), layers) in enumerate(zip(numbered, layers_per_line)):
            if top:
                layers = layers[-1]
            elif average:
                layers = layers.mean(axis=0)
            if not numpy.isfinite(layers).all():  # finite weights whose products overflow float32
                raise SpacyElmoError(
                    f"{text.name}, line {number}: the biLM's vectors are not finite (NaN or inf): its weights "
                    "overflow float32; the output is not written"
                )
            raise_if_terminated()
            check_space(tmp, layers.nbytes + closing_bytes, name=output_path)
            handle.create_dataset(str(index), data=layers, dtype="float32")
            if line:
                sentence_to_index[line] = str(index)
            progress.update()
        mapping = handle.create_dataset(SENTENCE_TO_INDEX, (1,), dtype=h5py.special_dtype(vlen=str))
        mapping[0] = json.dumps(sentence_to_index)


#: An HDF5 dataset's header and its entry in the file's index, about 400 bytes.
_DATASET_BYTES = 1024


def _expected_size(text: InputText, n_lines: int, n_floats: int) -> int:
    """About how many bytes the output takes: the vectors, a header per line, the index."""
    return 4 * n_floats + n_lines * _DATASET_BYTES + text.size + HDF5_OVERHEAD_BYTES


#: Where a CR not followed by LF ends a line within what binary reading gives as one.
_AFTER_LONE_CR = re.compile(rb"(?<=\r)(?!\n)")


def _read_lines(text: InputText) -> Iterator[Tuple[int, str]]:
    """Yield (1-based line number, stripped text); undecodable bytes raise `InputError`.
    Lines end at LF, CR LF or CR, as Python's universal newlines (the reference's) read them."""
    offset = 0
    with text.open() as handle:
        lines = (line for chunk in handle for line in _AFTER_LONE_CR.split(chunk) if line)
        for number, raw in enumerate(lines, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                bad = raw[err.start : err.end]
                raise InputError(
                    f"{text.name}, line {number}: not valid UTF-8: bytes {bad!r} at byte offset "
                    f"{offset + err.start} of the file (byte {err.start + 1} of the line)"
                ) from None
            if number == 1:
                line = line.removeprefix("\ufeff")
            offset += len(raw)
            yield number, line.strip()


def _scan(text: InputText) -> Tuple[int, int, List[int]]:
    """Read INPUT once up front: line count, token count, empty line numbers.

    This finds undecodable bytes before any work is done and sizes the progress bar.
    """
    n_lines = n_tokens = 0
    empty_lines: List[int] = []
    for number, line in _read_lines(text):
        n_lines = number
        n_words = len(line.split())
        n_tokens += n_words
        if not n_words:
            empty_lines.append(number)
    return n_lines, n_tokens, empty_lines


def _parse_max_length(value: str) -> Optional[int]:
    """`--max-length`: a positive number of tokens, or None for "auto"."""
    if value == "auto":
        return None
    try:
        tokens = int(value)
    except ValueError:
        tokens = 0
    if tokens < 1:
        raise typer.BadParameter(
            f"{value!r} is neither 'auto' nor a positive number of tokens", param_hint="--max-length"
        )
    return tokens


def _locate(weights: Optional[Path], options: Optional[Path]) -> Tuple[Path, Path, str]:
    """(weights file, options.json, the model as the summary names it); without
    `weights`, the English biLM shipped in the package, as the component takes."""
    if weights is None:
        name = default_model("en")
        located, named_options = find_model(name)
        label = f"{name} (the default; --weights picks another)"
    else:
        located, named_options = find_model(weights)
        label = str(weights)
    weights_path, options_path = format_of(located).model_files(located, options or named_options)
    return weights_path, options_path, label


def _check_input(path: Path) -> None:
    if not path.exists():
        raise InputError(f"Input file not found: {path}")
    if not path.is_file():
        raise InputError(f"Input path is not a file: {path}")
