"""`spacy-elmo embed`: bulk biLM embeddings of a tokenised text file into HDF5.

The output is laid out like AllenNLP's former `allennlp elmo` command: one
dataset per input line, named by its 0-based index (`"0"`, `"1"`, ...), plus a
`sentence_to_index` dataset holding one JSON string that maps each sentence (the
stripped line) to its index string.
"""
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import typer

from .app import app
from .device import select_device
from ..errors import InputError, SpacyElmoError
from ..models.pytorch.embedder import ElmoEmbedder
from ..models.pytorch.original_format import load_bilm, resolve_paths
from ..named_models import locate_model
from ..output_files import (
    HDF5_OVERHEAD_BYTES, atomic_output_path, check_output_file, check_space, remove_stale_temp_files,
)
from ..stopping import raise_if_terminated

SENTENCE_TO_INDEX = "sentence_to_index"
# Below this many lines a run takes seconds, and a progress bar is only noise.
PROGRESS_MIN_LINES = 500
MAX_LINES_NAMED = 10


@app.command("embed")
def embed_command(
    input_path: Path = typer.Argument(
        ..., metavar="INPUT", help="UTF-8 text, one whitespace-tokenised sentence per line."
    ),
    output_path: Path = typer.Argument(
        ..., metavar="OUTPUT", help="HDF5 file to write (its directory is created)."
    ),
    weights: Path = typer.Option(
        ..., "--weights", "-w",
        help="The biLM: a weights .hdf5 file, a directory with options.json and weights.hdf5, or a model name (english-compact, small, medium, original, original-5.5b).",
    ),
    options: Optional[Path] = typer.Option(
        None, "--options", help="options.json, if it is not beside the weights."
    ),
    batch_size: int = typer.Option(32, "--batch-size", "-b", min=1, help="Sentences per forward pass."),
    max_length: int = typer.Option(
        256, "--max-length", min=1,
        help="Encode a line longer than this many tokens in spans of at most this many (each from a zero state, as the spaCy component does), so memory stays bounded.",
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
        raise typer.BadParameter("give at most one of --top and --average", param_hint="--top/--average")
    _check_input(input_path)
    located, named_options = locate_model(weights)
    weights_path, options_path = resolve_paths(located, options or named_options)
    check_output_file(output_path, inputs=(input_path, weights_path, options_path))
    remove_stale_temp_files(output_path.parent, [output_path.name])
    device = select_device(gpu_id)
    n_lines, n_tokens, empty_lines = _scan(input_path)
    bilm = load_bilm(weights_path, options_path)
    embedder = ElmoEmbedder(bilm, batch_size=batch_size, device=device, precision=precision, max_length=max_length)
    if empty_lines:
        dim = bilm.options.output_dim
        shape = (0, dim) if top or average else (bilm.options.n_output_layers, 0, dim)
        typer.secho(
            f"Warning: {input_path}: {_describe_lines(empty_lines)} empty "
            f"(written as empty datasets of shape {shape})",
            fg=typer.colors.YELLOW, err=True,
        )

    layers_written = 1 if top or average else bilm.options.n_output_layers
    check_space(output_path, _expected_size(input_path, n_lines, n_tokens * layers_written * bilm.options.output_dim))
    start = time.perf_counter()
    write_embeddings(input_path, output_path, embedder, n_lines=n_lines, top=top, average=average)
    seconds = time.perf_counter() - start
    # One unwrapped line (wasabi would wrap it at 80 columns), easy to grep from logs.
    typer.secho(
        f"Wrote {output_path}: {n_lines} sentences, {n_tokens} tokens in {seconds:.2f} s "
        f"({n_tokens / max(seconds, 1e-9):,.0f} tokens/s)",
        fg=typer.colors.GREEN,
    )


def write_embeddings(
    input_path: Path,
    output_path: Path,
    embedder: ElmoEmbedder,
    *,
    n_lines: int,
    top: bool = False,
    average: bool = False,
) -> None:
    """Stream INPUT through `embedder` into a new HDF5 file, one dataset per line.

    The file is written under a temporary name and renamed only when complete;
    before each dataset the space for it and the rest of the file is checked, so a
    full disk or a file-size limit stops the command with one line and the previous
    OUTPUT, if any, stays as it was.
    """
    import h5py
    from tqdm import tqdm

    texts, for_tokens = itertools.tee(text for _, text in _read_lines(input_path))
    layers_per_line = embedder.embed(text.split() for text in for_tokens)
    sentence_to_index: Dict[str, str] = {}
    interactive = sys.stderr.isatty()
    progress = tqdm(
        total=n_lines, unit="sent", file=sys.stderr, disable=n_lines < PROGRESS_MIN_LINES,
        mininterval=0.1 if interactive else 30.0, dynamic_ncols=interactive,
    )
    # What the file still needs after the last dataset: the sentence index and HDF5's bookkeeping.
    closing_bytes = input_path.stat().st_size + n_lines * _DATASET_BYTES + HDF5_OVERHEAD_BYTES
    with progress, atomic_output_path(output_path) as tmp, h5py.File(tmp, "w") as handle:
        for index, (text, layers) in enumerate(zip(texts, layers_per_line)):
            if top:
                layers = layers[-1]
            elif average:
                layers = layers.mean(axis=0)
            raise_if_terminated()
            check_space(tmp, layers.nbytes + closing_bytes, name=output_path)
            handle.create_dataset(str(index), data=layers, dtype="float32")
            if text:
                sentence_to_index[text] = str(index)
            progress.update()
        mapping = handle.create_dataset(SENTENCE_TO_INDEX, (1,), dtype=h5py.special_dtype(vlen=str))
        mapping[0] = json.dumps(sentence_to_index)


#: An HDF5 dataset's header and its entry in the file's index, about 400 bytes.
_DATASET_BYTES = 1024


def _expected_size(input_path: Path, n_lines: int, n_floats: int) -> int:
    """About how many bytes the output takes: the vectors, a header per line, the index."""
    return 4 * n_floats + n_lines * _DATASET_BYTES + input_path.stat().st_size + HDF5_OVERHEAD_BYTES


def _read_lines(path: Path) -> Iterator[Tuple[int, str]]:
    """Yield (1-based line number, stripped text); undecodable bytes raise `InputError`."""
    offset = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                bad = raw[err.start : err.end]
                raise InputError(
                    f"{path}, line {number}: not valid UTF-8: bytes {bad!r} at byte offset "
                    f"{offset + err.start} of the file (byte {err.start + 1} of the line)"
                ) from None
            if number == 1:
                text = text.removeprefix("\ufeff")
            offset += len(raw)
            yield number, text.strip()


def _scan(path: Path) -> Tuple[int, int, List[int]]:
    """Read INPUT once up front: line count, token count, empty line numbers.

    This finds undecodable bytes before any work is done and sizes the progress bar.
    """
    n_lines = n_tokens = 0
    empty_lines: List[int] = []
    for number, text in _read_lines(path):
        n_lines = number
        n_words = len(text.split())
        n_tokens += n_words
        if not n_words:
            empty_lines.append(number)
    return n_lines, n_tokens, empty_lines


def _check_input(path: Path) -> None:
    if not path.exists():
        raise InputError(f"Input file not found: {path}")
    if not path.is_file():
        raise InputError(f"Input path is not a file: {path}")


def _describe_lines(numbers: List[int]) -> str:
    named = ", ".join(str(n) for n in numbers[:MAX_LINES_NAMED])
    more = f" and {len(numbers) - MAX_LINES_NAMED} more" if len(numbers) > MAX_LINES_NAMED else ""
    noun = "line" if len(numbers) == 1 else "lines"
    verb = "is" if len(numbers) == 1 else "are"
    return f"{noun} {named}{more} {verb}"
