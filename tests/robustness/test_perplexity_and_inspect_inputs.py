"""`perplexity` and `inspect` on hostile inputs: one line, exit code 1, nothing changed."""
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from .conftest import Probe, fifo_that_ends, run_probe

#: What a file that vocab.txt links to holds: no message may show it.
SECRET = "root:x:0:0:secret-token-4711"


def _link_to_secret(run: Path) -> None:
    """vocab.txt a link to a file of secrets, and export.json's digest of it made to match."""
    secret = run.parent / "secret.txt"
    secret.write_text(SECRET + "\n", encoding="utf8")
    (run / "vocab.txt").unlink()
    (run / "vocab.txt").symlink_to(secret)
    manifest = json.loads((run / "export.json").read_text(encoding="utf8"))
    manifest["sha256"]["vocab.txt"] = hashlib.sha256(secret.read_bytes()).hexdigest()
    (run / "export.json").write_text(json.dumps(manifest), encoding="utf8")


def _fifo(path: Path) -> None:
    path.unlink()
    fifo_that_ends(path)


def _run(ws: Path, run: Path, edit=None) -> Path:
    shutil.copytree(run, ws / "run")
    if edit is not None:
        edit(ws / "run")
    return ws / "run"


def _pipeline(ws: Path, pipeline: Path, edit=None) -> Path:
    shutil.copytree(pipeline, ws / "pipeline")
    if edit is not None:
        edit(ws / "pipeline" / "elmo" / "model")
    return ws / "pipeline"


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_bytes(path: Path) -> None:
    """64 bytes in the middle of the file, changed: the weights' values, not their layout."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0x5A for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))


def _write(path: Path, data) -> Path:
    path.write_bytes(data) if isinstance(data, bytes) else path.write_text(data, encoding="utf8")
    return path


def perplexity_probes(run: Path):
    return [
        Probe("perplexity: run missing", lambda ws: ["perplexity", "nowhere", "text.txt"], "nowhere"),
        Probe("perplexity: run without its vocabulary",
              lambda ws: ["perplexity", _run(ws, run, lambda d: (d / "vocab.txt").unlink()), "text.txt"],
              "vocab.txt"),
        Probe("perplexity: text missing", lambda ws: ["perplexity", _run(ws, run), "none.txt"], "none.txt"),
        Probe("perplexity: text not UTF-8",
              lambda ws: ["perplexity", _run(ws, run), _write(ws / "bad.txt", b"ok\n\xff\xfe\n")], "bad.txt"),
        Probe("perplexity: empty text",
              lambda ws: ["perplexity", _run(ws, run), _write(ws / "empty.txt", "")], "empty.txt"),
        Probe("perplexity: a published model, without a softmax", lambda ws: ["perplexity", "small", "text.txt"],
              "small is published without the softmax and vocabulary that perplexity reads"),
        Probe("perplexity: --unigram of a shipped model",
              lambda ws: ["perplexity", "english-compact", "text.txt", "--unigram"],
              "--unigram counts a run's training text, and english-compact comes without its own"),
        Probe("perplexity: vocab.txt links to a file of secrets",
              lambda ws: ["perplexity", _run(ws, run, _link_to_secret), "text.txt"],
              "run/vocab.txt: the first three lines must be the words <S>, </S>, <UNK>", absent="secret-token"),
    ]


def inspect_probes(pipeline: Path):
    return [
        Probe("inspect: pipeline missing", lambda ws: ["inspect", "nowhere"], "Cannot load the pipeline"),
        Probe("inspect: a directory that is not a pipeline", lambda ws: ["inspect", "model"],
              "Cannot load the pipeline"),
        Probe("inspect: truncated component", lambda ws: ["inspect", _pipeline(ws, pipeline, _truncate)],
              "damaged or incomplete"),
        Probe("inspect: 64 flipped bytes in the component", lambda ws: ["inspect", _pipeline(ws, pipeline, _flip_bytes)],
              "damaged"),
        Probe("inspect: the component's model a FIFO", lambda ws: ["inspect", _pipeline(ws, pipeline, _fifo)],
              "/pipeline/elmo/model is a FIFO (named pipe), not a regular file"),
    ]


@pytest.mark.parametrize("index", range(8))
def test_perplexity_refuses_with_one_line_and_changes_nothing(index, finished_run, workspace, capsys, monkeypatch):
    run_probe(perplexity_probes(finished_run)[index], workspace, capsys, monkeypatch)


@pytest.mark.parametrize("index", range(5))
def test_inspect_refuses_with_one_line_and_changes_nothing(index, saved_pipeline, workspace, capsys, monkeypatch):
    run_probe(inspect_probes(saved_pipeline)[index], workspace, capsys, monkeypatch)
