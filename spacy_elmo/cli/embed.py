"""`spacy-elmo embed`: bulk biLM embeddings of a tokenised text file into HDF5.

The output is laid out like AllenNLP's former `allennlp elmo` command: one
dataset per input line, named by its 0-based index (`"0"`, `"1"`, ...), plus a
`sentence_to_index` dataset holding one JSON string that maps each sentence (the
stripped line) to its index string.
"""
import itertools
import json
import re
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import typer

from .app import app
from .device import select_device
from ..errors import InputError
from ..models.loaders import find_model, load_model
from ..models.pytorch.elmoformanylangs_format import CONFIG_NAME, is_elmoformanylangs_folder
from ..models.pytorch.embedder import ElmoEmbedder, max_tokens_per_line
from ..models.pytorch.original_format import resolve_paths
from ..named_models import default_model
from ..output_files import (
    HDF5_OVERHEAD_BYTES, atomic_output_path, check_output_file, check_space, remove_stale_temp_files,
)
from ..sigterm import raise_if_terminated

SENTENCE_TO_INDEX = "sentence_to_index"
# Below this many lines a run takes seconds, and a progress bar is only noise.
PROGRESS_MIN_LINES = 500
MAX_LINES_NAMED = 10
#: `--max-length auto` keeps a line whole while its encoding fits in this much memory.
LINE_MEMORY_BYTES = 2**30


@app.command("embed")
def embed_command(
    input_path: Path = typer.Argument(
        ..., metavar="INPUT", help="UTF-8 text, one whitespace-tokenised sentence per line."
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
        raise typer.BadParameter("give at most one of --top and --average", param_hint="--top/--average")
    if options is not None and weights is None:
        raise typer.BadParameter("give --weights with --options", param_hint="--options")
    fixed_length = _parse_max_length(max_length)
    _check_input(input_path)
    weights_path, options_path, model_label = _locate(weights, options)
    check_output_file(output_path, inputs=(input_path, weights_path, options_path))
    remove_stale_temp_files(output_path.parent, [output_path.name])
    device = select_device(gpu_id)
    n_lines, n_tokens, empty_lines = _scan(input_path)
    bilm = load_model(weights_path, options_path)
    line_tokens = fixed_length or max_tokens_per_line(bilm.options, LINE_MEMORY_BYTES)
    embedder = ElmoEmbedder(bilm, batch_size=batch_size, device=device, precision=precision, max_length=line_tokens)
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
    cut_lines = write_embeddings(input_path, output_path, embedder, n_lines=n_lines, top=top, average=average)
    seconds = time.perf_counter() - start
    # Unwrapped lines (wasabi would wrap them at 80 columns), easy to grep from logs.
    typer.secho(
        f"Wrote {output_path}: {n_lines} sentences, {n_tokens} tokens in {seconds:.2f} s "
        f"({n_tokens / max(seconds, 1e-9):,.0f} tokens/s), model {model_label}",
        fg=typer.colors.GREEN,
    )
    if cut_lines:
        setting = fixed_length or f"auto: {LINE_MEMORY_BYTES / 2**30:g} GiB of memory per line"
        typer.secho(f"⚠ {_describe_cut(cut_lines, line_tokens, f'--max-length {setting}')}", fg=typer.colors.YELLOW)


def write_embeddings(
    input_path: Path,
    output_path: Path,
    embedder: ElmoEmbedder,
    *,
    n_lines: int,
    top: bool = False,
    average: bool = False,
) -> List[int]:
    """Stream INPUT through `embedder` into a new HDF5 file, one dataset per line;
    return the (1-based) numbers of the lines cut into spans of ``embedder.max_length``.

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
    cut_lines: List[int] = []
    interactive = sys.stderr.isatty()
    progress = tqdm(
        total=n_lines, unit="sent", file=sys.stderr, disable=n_lines < PROGRESS_MIN_LINES,
        mininterval=0.1 if interactive else 30.0, dynamic_ncols=interactive,
    )
    # What the file still needs after the last dataset: the sentence index and HDF5's bookkeeping.
    closing_bytes = input_path.stat().st_size + n_lines * _DATASET_BYTES + HDF5_OVERHEAD_BYTES
    with progress, atomic_output_path(output_path) as tmp, h5py.File(tmp, "w") as handle:
        for index, (text, layers) in enumerate(zip(texts, layers_per_line)):
            if layers.shape[1] > embedder.max_length:  # (n_layers, n_tokens, dim)
                cut_lines.append(index + 1)
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
    return cut_lines


#: An HDF5 dataset's header and its entry in the file's index, about 400 bytes.
_DATASET_BYTES = 1024


def _expected_size(input_path: Path, n_lines: int, n_floats: int) -> int:
    """About how many bytes the output takes: the vectors, a header per line, the index."""
    return 4 * n_floats + n_lines * _DATASET_BYTES + input_path.stat().st_size + HDF5_OVERHEAD_BYTES


#: Where a CR not followed by LF ends a line within what binary reading gives as one.
_AFTER_LONE_CR = re.compile(rb"(?<=\r)(?!\n)")


def _read_lines(path: Path) -> Iterator[Tuple[int, str]]:
    """Yield (1-based line number, stripped text); undecodable bytes raise `InputError`.
    Lines end at LF, CR LF or CR, as Python's universal newlines (the reference's) read them."""
    offset = 0
    with path.open("rb") as handle:
        lines = (line for chunk in handle for line in _AFTER_LONE_CR.split(chunk) if line)
        for number, raw in enumerate(lines, start=1):
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
    if options is None and is_elmoformanylangs_folder(located):
        return located, located / CONFIG_NAME, label
    weights_path, options_path = resolve_paths(located, options or named_options)
    return weights_path, options_path, label


def _check_input(path: Path) -> None:
    if not path.exists():
        raise InputError(f"Input file not found: {path}")
    if not path.is_file():
        raise InputError(f"Input path is not a file: {path}")


def _describe_cut(numbers: List[int], max_length: int, how: str) -> str:
    """E.g. "2 lines longer than 300 tokens (lines 4, 9) were cut into spans of 300
    (--max-length 300); their vectors differ from an uncut run's"."""
    one = len(numbers) == 1
    return (
        f"{len(numbers)} {'line' if one else 'lines'} longer than {max_length:,} tokens ({_name_lines(numbers)}) "
        f"{'was' if one else 'were'} cut into spans of {max_length:,} ({how}); "
        f"{'its' if one else 'their'} vectors differ from an uncut run's"
    )


def _name_lines(numbers: List[int]) -> str:
    named = ", ".join(str(n) for n in numbers[:MAX_LINES_NAMED])
    more = f" and {len(numbers) - MAX_LINES_NAMED} more" if len(numbers) > MAX_LINES_NAMED else ""
    return f"{'line' if len(numbers) == 1 else 'lines'} {named}{more}"


def _describe_lines(numbers: List[int]) -> str:
    return f"{_name_lines(numbers)} {'is' if len(numbers) == 1 else 'are'}"
