"""`pretrain` on hostile inputs: one line, exit code 1, no output directory made or changed."""
import shutil
from pathlib import Path

import pytest
import torch

from ..cli.test_pretrain import FAST
from .conftest import Probe, run_probe


def pretrain(*extra, output="out"):
    return ["pretrain", "pretrain.cfg", output, "--paths.train", "corpus.txt", "--training.max_steps", "2",
            *FAST, *extra]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf8")
    return path


def _with_run(ws: Path, run: Path, edit=None):
    shutil.copytree(run, ws / "out")
    if edit is not None:
        checkpoint = torch.load(ws / "out" / "checkpoint.pt", weights_only=True)
        edit(checkpoint)
        torch.save(checkpoint, ws / "out" / "checkpoint.pt")


PROBES = [
    Probe("config missing", lambda ws: ["pretrain", "none.cfg", "out"], "none.cfg"),
    Probe("config not a config", lambda ws: (_write(ws / "pretrain.cfg", "[training\nx = "), pretrain())[1],
          "pretrain.cfg"),
    Probe("corpus missing", lambda ws: pretrain("--paths.train", "none.txt"), "corpus path not found: none.txt"),
    Probe("corpus empty", lambda ws: (_write(ws / "corpus.txt", ""), pretrain())[1], "corpus.txt"),
    Probe("unknown config key", lambda ws: pretrain("--training.typo", "1"), "unknown setting(s) in [training]: typo"),
    Probe("max_steps 0", lambda ws: pretrain("--training.max_steps", "0"), "max_steps"),
    Probe("beta1 1.5", lambda ws: pretrain("--optimizer.beta1", "1.5"), "beta1"),
    Probe("eps -1", lambda ws: pretrain("--optimizer.eps", "-1"), "eps"),
    Probe("weight_decay -1", lambda ws: pretrain("--optimizer.weight_decay", "-1"), "weight_decay"),
    Probe("initial_accumulator -1",
          lambda ws: pretrain("--optimizer.name", "adagrad", "--optimizer.initial_accumulator", "-1"),
          "initial_accumulator"),
    Probe("lstm_dim 1e9", lambda ws: pretrain("--model.lstm_dim", "1000000000"), "lstm_dim"),
    Probe("--init-from a missing model", lambda ws: pretrain("--init-from", "nowhere"), "nowhere"),
    Probe("output is a file", lambda ws: pretrain(output="corpus.txt"), "is a file, not a directory"),
    Probe("--resume without a checkpoint", lambda ws: pretrain("--resume"), "No checkpoint at"),
]


@pytest.mark.parametrize("probe", PROBES, ids=str)
def test_pretrain_refuses_with_one_line_and_changes_nothing(probe, workspace, capsys, monkeypatch):
    run_probe(probe, workspace, capsys, monkeypatch)


def test_pretrain_init_from_with_a_smaller_lstm_dim_refuses_and_changes_nothing(
    finished_run, workspace, capsys, monkeypatch
):
    probe = Probe(
        "--init-from with a smaller lstm_dim",
        lambda ws: pretrain("--init-from", str(finished_run), "--model.lstm_dim", "8"),
        "can widen a biLM's LSTM, not narrow it",
    )
    run_probe(probe, workspace, capsys, monkeypatch)


RUN_PROBES = [
    ("another run's directory", None, [], "already holds a training run"),
    ("a truncated checkpoint", "truncate", ["--resume"], "checkpoint.pt"),
    ("a foreign checkpoint", "foreign", ["--resume"], "checkpoint.pt"),
    ("a step that is a string", lambda c: c.__setitem__("step", "7"), ["--resume"], "step"),
    ("a negative step", lambda c: c.__setitem__("step", -3), ["--resume"], "step"),
]


def _tamper(ws: Path, run: Path, how) -> None:
    _with_run(ws, run, how if callable(how) else None)
    checkpoint = ws / "out" / "checkpoint.pt"
    if how == "truncate":
        checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    elif how == "foreign":
        torch.save({"weights": torch.zeros(3)}, checkpoint)


@pytest.mark.parametrize("name,how,extra,message", RUN_PROBES, ids=[p[0] for p in RUN_PROBES])
def test_pretrain_on_a_tampered_run_refuses_and_changes_nothing(
    name, how, extra, message, finished_run, workspace, capsys, monkeypatch
):
    probe = Probe(name, lambda ws: (_tamper(ws, finished_run, how), pretrain(*extra))[1], message)
    run_probe(probe, workspace, capsys, monkeypatch)


@pytest.mark.parametrize(
    "text,extra",
    [("word\n", []), ("x" * 1_000_001 + "\n", ["--corpus.tokenizer", "en"])],
    ids=["one word", "a one-million-character line, spaCy's tokenizer"],
)
def test_tiny_or_odd_corpora_train(text, extra, workspace, capsys, monkeypatch):
    """Odd is not hostile: these are corpora, and the run ends normally."""
    from ..conftest import run_cli

    _write(workspace / "corpus.txt", text)
    monkeypatch.chdir(workspace)
    code, out, err = run_cli(capsys, monkeypatch, *pretrain(*extra))
    assert code == 0, err
    assert (workspace / "out" / "weights.hdf5").is_file()
