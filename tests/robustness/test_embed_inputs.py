"""`embed` on hostile inputs: one line, exit code 1 (2 for a value click refuses), nothing changed."""
import json
import os
from pathlib import Path

import h5py
import numpy
import pytest

from .conftest import Probe, run_probe


#: A path of 4,443 characters, over Linux's PATH_MAX (4,096).
LONG_PATH = "a" * 200 + ("/" + "b" * 200) * 21 + "/out.hdf5"


def embed(*extra):
    return ["embed", "text.txt", "out.hdf5", "--weights", "model", *extra]


def _write(path: Path, data) -> Path:
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf8")
    return path


def _edit_weights(ws: Path, edit) -> None:
    with h5py.File(ws / "model" / "weights.hdf5", "r+") as handle:
        edit(handle)


def _nan_bias(handle) -> None:
    handle["CNN/b_cnn_0"][0] = numpy.nan


def _external_bias(handle) -> None:
    shape = handle["CNN/b_cnn_0"].shape
    secret = _write(Path(handle.filename).parent.parent / "secret.bin", b"\x01" * (4 * shape[0]))
    del handle["CNN/b_cnn_0"]
    handle.create_dataset("CNN/b_cnn_0", shape=shape, dtype="float32", external=[(str(secret), 0, 4 * shape[0])])


def _options(ws: Path, change) -> None:
    path = ws / "model" / "options.json"
    options = json.loads(path.read_text())
    change(options)
    path.write_text(json.dumps(options))


PROBES = [
    Probe("input missing", lambda ws: ["embed", "nothing.txt", "out.hdf5", "--weights", "model"],
          "Input file not found: nothing.txt"),
    Probe("input is a directory", lambda ws: ["embed", "model", "out.hdf5", "--weights", "model"],
          "Input path is not a file: model"),
    Probe("input not UTF-8",
          lambda ws: (_write(ws / "text.txt", b"fine\nbad \xff byte\n"), embed())[1],
          "text.txt, line 2: not valid UTF-8"),
    Probe("output is the input", lambda ws: ["embed", "text.txt", "text.txt", "--weights", "model"],
          "Output path text.txt is the input text.txt"),
    Probe("output is a directory", lambda ws: ["embed", "text.txt", "model", "--weights", "model"],
          "Output path is a directory: model"),
    Probe("output is the weights",
          lambda ws: ["embed", "text.txt", "model/weights.hdf5", "--weights", "model"],
          "is the input model/weights.hdf5"),
    Probe("output under a file", lambda ws: ["embed", "text.txt", "text.txt/out.hdf5", "--weights", "model"],
          "is a file, not a directory"),
    Probe("weights missing", lambda ws: ["embed", "text.txt", "out.hdf5", "--weights", "none.hdf5"],
          "none.hdf5"),
    Probe("weights are a FIFO",
          lambda ws: (os.remove(ws / "model" / "weights.hdf5"), os.mkfifo(ws / "model" / "weights.hdf5"),
                      embed())[2],
          "Weights path model/weights.hdf5 is a FIFO (named pipe), not a regular file"),
    Probe("weights are text",
          lambda ws: (_write(ws / "model" / "weights.hdf5", "not hdf5\n"), embed())[1],
          "not a readable HDF5 file"),
    Probe("weights: HDF5 signature, then garbage",
          lambda ws: (_write(ws / "model" / "weights.hdf5", b"\x89HDF\r\n\x1a\n" + b"\x00\xff" * 500), embed())[1],
          "not a readable HDF5 file"),
    Probe("weights hold NaN", lambda ws: (_edit_weights(ws, _nan_bias), embed())[1], "CNN/b_cnn_0"),
    Probe("weights read an outside file", lambda ws: (_edit_weights(ws, _external_bias), embed())[1],
          "keeps its data in an outside file; refused"),
    Probe("weights miss a dataset",
          lambda ws: (_edit_weights(ws, lambda h: h.__delitem__("CNN/b_cnn_0")), embed())[1],
          "missing dataset 'CNN/b_cnn_0'"),
    Probe("weights named like ../../etc/passwd",
          lambda ws: ["embed", "text.txt", "out.hdf5", "--weights", "../../etc/passwd"],
          "passwd"),
    Probe("options not JSON", lambda ws: (_write(ws / "model" / "options.json", "{oops"), embed())[1],
          "options.json: not valid JSON (line 1"),
    Probe("options are a list", lambda ws: (_write(ws / "model" / "options.json", "[]"), embed())[1],
          "options.json"),
    Probe("options miss a key", lambda ws: (_options(ws, lambda o: o["lstm"].pop("dim")), embed())[1],
          "dim"),
    Probe("options ask for 10^9 filters",
          lambda ws: (_options(ws, lambda o: o["char_cnn"].__setitem__("filters", [[1, 10**9]])), embed())[1],
          "filters"),
    Probe("--batch-size 0", lambda ws: embed("--batch-size", "0"), "--batch-size", code=2),
    Probe("--batch-size 1e23", lambda ws: embed("-b", "1e23"), "Invalid value for '--batch-size'", code=2),
    Probe("--max-length 0", lambda ws: embed("--max-length", "0"), "--max-length", code=2),
    Probe("--max-length lots", lambda ws: embed("--max-length", "lots"),
          "--max-length: 'lots' is neither 'auto' nor a positive", code=2),
    Probe("--options is a directory",
          lambda ws: ["embed", "text.txt", "out.hdf5", "--weights", "model/weights.hdf5", "--options", "model"],
          "Options path model is a directory, not a regular file"),
    Probe("--options without --weights",
          lambda ws: ["embed", "text.txt", "out.hdf5", "--options", "model/options.json"],
          "give --weights with --options"),
    Probe("--top and --average", lambda ws: embed("--top", "--average"), "give at most one of --top and --average"),
    Probe("--precision int4", lambda ws: embed("--precision", "int4"), "int4"),
    # Issue 60: an output renamed over a device or a FIFO would replace it (as root, /dev/null itself).
    Probe("output is a FIFO", lambda ws: (os.mkfifo(ws / "out.fifo"), ["embed", "text.txt", "out.fifo", "-w", "model"])[1],
          "Output path out.fifo is a FIFO (named pipe), not a regular file: refusing to replace it (give another path)"),
    Probe("output is a link to /dev/null",
          lambda ws: (os.symlink("/dev/null", ws / "null"), ["embed", "text.txt", "null", "-w", "model"])[1],
          "Output path null is a character device, not a regular file: refusing to replace it (give another path)"),
    Probe("output path over PATH_MAX", lambda ws: ["embed", "text.txt", LONG_PATH, "-w", "model"],
          "a" * 60 + "..." + "b" * 48 + "/out.hdf5: File name too long"),
    Probe("input path over PATH_MAX", lambda ws: ["embed", LONG_PATH, "out.hdf5", "-w", "model"],
          "a" * 60 + "..." + "b" * 48 + "/out.hdf5: File name too long"),
]


@pytest.mark.parametrize("probe", PROBES, ids=str)
def test_embed_refuses_with_one_line_and_changes_nothing(probe, workspace, capsys, monkeypatch):
    run_probe(probe, workspace, capsys, monkeypatch)


def test_a_file_with_lines_ended_by_cr_alone_is_read_as_the_reference_reads_it(workspace, capsys, monkeypatch):
    """Issue 60: a file of "\\r"-ended lines was one sentence; Python's universal newlines (the
    reference's) end lines at "\\n", "\\r\\n" and "\\r"."""
    from ..conftest import run_cli

    _write(workspace / "lf.txt", b"one two\nthree four\n\nfive\n")
    _write(workspace / "cr.txt", b"one two\rthree four\r\r\nfive\r")
    monkeypatch.chdir(workspace)
    for name in ("lf", "cr"):
        code, _, err = run_cli(capsys, monkeypatch, "embed", f"{name}.txt", f"{name}.hdf5", "-w", "model")
        assert code == 0, err
    with h5py.File(workspace / "lf.hdf5", "r") as lf, h5py.File(workspace / "cr.hdf5", "r") as cr:
        assert sorted(cr) == sorted(lf) == ["0", "1", "2", "3", "sentence_to_index"]
        assert all(numpy.array_equal(cr[key][()], lf[key][()]) for key in ("0", "1", "2", "3"))
        assert cr["sentence_to_index"][0] == lf["sentence_to_index"][0]


def test_an_output_name_of_255_bytes_is_written(workspace, capsys, monkeypatch):
    """Issue 60: its temporary name (the name and a suffix) was longer than a name may be: a traceback."""
    from ..conftest import run_cli

    name = "é" * 100 + "n" * 50 + ".hdf5"  # 255 bytes in UTF-8
    monkeypatch.chdir(workspace)
    code, _, err = run_cli(capsys, monkeypatch, "embed", "text.txt", name, "-w", "model")
    assert code == 0, err
    assert (workspace / name).is_file() and not list(workspace.glob(".*.tmp"))
