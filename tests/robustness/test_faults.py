"""Faults during long work: a kill, a full disk. The previous outputs stay intact,
the error is one line, and no temporary file outlives the run."""
import hashlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy
import pytest
import torch

import spacy
from spacy.tokens import DocBin

from spacy_elmo import output_files

from ..conftest import run_cli
from ..pipeline.util import elmo_nlp, train_examples
from .conftest import snapshot

ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1"}


def _digest(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def _file_size_limit(n_bytes: int):
    """A preexec_fn: the child may write files of at most `n_bytes` (``ulimit -f``)."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (n_bytes, n_bytes))


EMBED = [sys.executable, "-m", "spacy_elmo", "embed", "text.txt", "out.hdf5", "--weights", "model"]


def _text_and_previous_output(workspace: Path, line: str, times: int) -> Path:
    """INPUT of `times` copies of `line`, and an OUTPUT from an earlier run (returned)."""
    (workspace / "text.txt").write_text(line * times, encoding="utf8")
    previous = workspace / "out.hdf5"
    previous.write_bytes(b"the previous output")
    return previous


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip() and "sent/s" not in line and "step/s" not in line]
    assert len(lines) == 1 and lines[0].startswith("✘ ") and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.slow
def test_a_file_size_limit_during_embed_is_one_line_and_keeps_the_previous_output(workspace):
    previous = _text_and_previous_output(workspace, "the quick brown fox jumps over the lazy dog\n", 3000)
    done = subprocess.run(
        EMBED, cwd=workspace, env=ONE_THREAD, capture_output=True, text=True, timeout=300,
        preexec_fn=_file_size_limit(200_000),
    )
    assert done.returncode == 1
    assert "Output out.hdf5: not enough space" in _one_line(done.stderr)
    assert previous.read_bytes() == b"the previous output"
    assert not list(workspace.glob(".*.tmp"))


def test_space_running_out_while_embedding_is_one_line_and_keeps_the_previous_output(
    workspace, capsys, monkeypatch
):
    """The disk fills while the file is written (another program's writes): checked before each line."""
    previous = _text_and_previous_output(workspace, "a line of words\n", 50)
    calls = {"n": 0}
    real = output_files.bytes_writable

    def filling_up(path):
        calls["n"] += 1
        return real(path) if calls["n"] < 20 else 1000

    monkeypatch.setattr(output_files, "bytes_writable", filling_up)
    monkeypatch.chdir(workspace)
    code, out, err = run_cli(capsys, monkeypatch, "embed", "text.txt", "out.hdf5", "--weights", "model")
    assert code == 1 and calls["n"] == 20
    assert "Output out.hdf5: not enough space" in _one_line(err)
    assert previous.read_bytes() == b"the previous output"
    assert not list(workspace.glob(".*.tmp"))


@pytest.mark.slow
def test_a_file_size_limit_at_a_checkpoint_keeps_the_previous_checkpoint(workspace, finished_run):
    run = workspace / "out"
    shutil.copytree(finished_run, run)
    before = snapshot(run)
    done = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "pretrain", "out/config.cfg", "out", "--resume",
         "--training.max_steps", "4", "--training.checkpoint_every", "1"],
        cwd=workspace, env=ONE_THREAD, capture_output=True, text=True, timeout=300,
        preexec_fn=_file_size_limit((run / "checkpoint.pt").stat().st_size // 2),
    )
    assert done.returncode == 1
    line = _one_line(done.stderr)
    assert "checkpoint.pt" in line and "not enough space" in line, line
    assert snapshot(run).get("checkpoint.pt") == before["checkpoint.pt"]
    assert not list(run.glob(".*.tmp"))


@pytest.mark.slow
def test_sigkill_while_embedding_keeps_the_previous_output(workspace):
    previous = _text_and_previous_output(workspace, "the cat sat on the mat\n", 100_000)
    process = subprocess.Popen(
        EMBED, cwd=workspace, env=ONE_THREAD, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 600
        while not list(workspace.glob(".out.hdf5.*.tmp")):
            assert time.monotonic() < deadline and process.poll() is None, "no temporary file appeared"
            time.sleep(0.05)
        time.sleep(0.5)  # mid-write
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert previous.read_bytes() == b"the previous output"
    # The next run removes what the killed one left.
    (workspace / "text.txt").write_text("the cat sat on the mat\n", encoding="utf8")
    done = subprocess.run(EMBED, cwd=workspace, env=ONE_THREAD, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not list(workspace.glob(".*.tmp"))


def _training_config(workspace: Path, allennlp_model_dir: Path) -> Path:
    """`spacy train` inputs for an elmo + tagger pipeline on the fixture biLM."""
    nlp = elmo_nlp(allennlp_model_dir / "lm_weights.hdf5", initialize=False)
    examples = train_examples(nlp)
    DocBin(docs=[example.reference for example in examples]).to_disk(workspace / "train.spacy")
    config = nlp.config.copy()
    config["paths"] = {**config["paths"], "train": str(workspace / "train.spacy"), "dev": str(workspace / "train.spacy")}
    config["training"]["eval_frequency"] = 4
    config.to_disk(workspace / "train.cfg")
    return workspace / "train.cfg"


@pytest.mark.slow
def test_sigkill_of_spacy_train_mid_epoch_keeps_the_last_saved_pipeline(workspace, allennlp_model_dir):
    """spaCy saves model-last and model-best at each evaluation (step 0 included); a kill
    between evaluations leaves those saves as they were, loadable."""
    config = _training_config(workspace, allennlp_model_dir)
    process = subprocess.Popen(
        [sys.executable, "-m", "spacy", "train", str(config), "--output", "trained",
         "--training.max_steps", "100000", "--training.eval_frequency", "100000", "--training.patience", "0",
         "--training.max_epochs", "0"],
        cwd=workspace, env=ONE_THREAD, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        header_seen = False
        for line in process.stdout:  # spaCy prints a row after each evaluation's save
            header_seen = header_seen or "LOSS" in line
            if header_seen and line.split() and line.split()[0].isdigit():
                break
        saved = snapshot(workspace / "trained")
        time.sleep(3)  # training on, mid-epoch, far from the next evaluation
        assert process.poll() is None
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=30)
    assert saved and snapshot(workspace / "trained") == saved
    for name in ("model-last", "model-best"):
        nlp = spacy.load(workspace / "trained" / name)
        assert nlp("The bank of the river .")._.elmo is not None


@pytest.mark.slow
def test_a_run_keeps_the_files_it_did_not_write_in_its_output_directory(workspace, reference_dir, dead_pid):
    """Only its own outputs' temporary files of dead processes are a run's to remove."""
    from ..cli.test_pretrain import FAST

    run = workspace / "out"
    run.mkdir()
    kept = [
        run / f".mydata.{dead_pid}-draft.tmp",  # looks like a temporary file, is the user's
        run / f".notes.txt.spacy-elmo-{dead_pid}@{output_files._host()}-abcd1234.tmp",  # not a run output's name
        run / "notes.txt",
    ]
    for path in kept:
        path.write_text("the user's", encoding="utf8")
    done = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "pretrain", "pretrain.cfg", "out",
         "--paths.train", str(reference_dir / "bilm-tf" / "train" / "data.txt"), "--training.max_steps", "2", *FAST],
        cwd=workspace, env=ONE_THREAD, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert all(path.read_text(encoding="utf8") == "the user's" for path in kept)


@pytest.mark.slow
def test_one_very_long_line_keeps_embed_memory_bounded(workspace):
    """A 100,000-token line cut into spans (here of 2,000 tokens, below the memory bound's
    31,895 for this biLM) is encoded with about a short line's peak memory."""
    def peak_rss_mb(line: str, times: int) -> float:
        _text_and_previous_output(workspace, line, times)
        done = subprocess.run(
            EMBED + ["--max-length", "2000"], cwd=workspace, env=ONE_THREAD, capture_output=True, text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest child so far

    short = peak_rss_mb("a short line\n", 1)
    long = peak_rss_mb("word " * 100_000 + "\n", 1)
    assert long - short < 150, (short, long)  # in one piece, this line took about 640 MB more


def test_a_run_stopped_while_exporting_is_refused_by_perplexity_and_exported_again_by_resume(
    workspace, finished_run, reference_dir, capsys, monkeypatch
):
    """Issue 60: stopped between its weights and its softmax, a run held step 3's weights beside step 2's
    softmax; `perplexity` scored them without a word, and `--resume` said "Saved" without exporting again."""
    from spacy_elmo.pretraining import run_directory

    from ..cli.test_pretrain import FAST

    shutil.copytree(finished_run, workspace / "out")
    text = reference_dir / "bilm-tf" / "train" / "data.txt"
    resume = ["pretrain", "pretrain.cfg", "out", "--resume", "--paths.train", text, "--vocab.size", "1000",
              "--training.max_steps", "3", *FAST]

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.chdir(workspace)
    with monkeypatch.context() as patch:
        patch.setattr(run_directory, "save_softmax", stopped)  # after weights.hdf5, before softmax.hdf5
        code, _, _ = run_cli(capsys, monkeypatch, *resume)
    assert code == 130
    before = snapshot(workspace)
    code, _, err = run_cli(capsys, monkeypatch, "perplexity", "out", "text.txt")
    assert code == 1 and _one_line(err) == (
        "✘ out: the exported biLM is not whole (its files are not those export.json lists: the run was stopped "
        "while exporting); pretrain --resume on it exports its last checkpoint again"
    )
    assert snapshot(workspace) == before
    code, out, err = run_cli(capsys, monkeypatch, *resume)
    assert code == 0 and "Exported the biLM of step 3 again" in out and "Saved the biLM to out (step 3)" in out, out + err
    checkpoint = torch.load(workspace / "out" / "checkpoint.pt", weights_only=True)
    with h5py.File(workspace / "out" / "softmax.hdf5", "r") as softmax:
        assert checkpoint["step"] == 3 and numpy.array_equal(softmax["softmax/W"][()], checkpoint["model"]["softmax.weight"].numpy())
    code, out, err = run_cli(capsys, monkeypatch, "perplexity", "out", "text.txt")
    assert code == 0 and "perplexity" in out, err
