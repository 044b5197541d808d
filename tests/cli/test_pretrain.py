"""`spacy-elmo pretrain`: overrides, outputs, errors, kill and resume, --resume auto."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Tuple

import pytest
import torch

from spacy_elmo.cli import main
from spacy_elmo.pretraining.resume import resume_mode
from spacy_elmo.pretraining.checkpoint import load_checkpoint
from spacy_elmo.pretraining.config import load_config
from spacy_elmo.pretraining.default_config import default_config_text
from spacy_elmo.pretraining.metrics import MetricsLog
from spacy_elmo.pretraining.trainer import Trainer

from ..pretraining.util import kill_at_step

FAST = [
    "--corpus.tokenizer", "whitespace", "--corpus.max_window", "12", "--corpus.shuffle_buffer", "4",
    "--training.tokens_per_step", "48", "--training.sort_window", "2", "--training.log_every", "1",
    "--training.eval_at_start", "false",
]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture()
def tiny_text(reference_dir: Path) -> Path:
    return reference_dir / "bilm-tf" / "train" / "data.txt"


def run_cli(capsys, monkeypatch, *args) -> Tuple[int, str, str]:
    """Run `spacy-elmo ARGS` in-process through `main`; (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["spacy-elmo", *map(str, args)])
    try:
        main()
        code = 0
    except SystemExit as exit_info:
        code = exit_info.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_pretrain_with_overrides(tmp_path, capsys, monkeypatch, tiny_text):
    config_path = tmp_path / "pretrain.cfg"
    run_cli(capsys, monkeypatch, "init-config", config_path, "--size", "tiny")
    output_dir = tmp_path / "out"
    code, out, err = run_cli(
        capsys, monkeypatch, "pretrain", config_path, output_dir, "--paths.train", tiny_text,
        "--paths.dev", tiny_text, "--training.max_steps", "6", "--optimizer.name", "adam",
        "--optimizer.learn_rate", "0.003", *FAST,
    )
    assert code == 0, out + err
    assert "Saved the biLM" in out
    saved = load_config(output_dir / "config.cfg")
    assert saved.optimizer.name == "adam" and saved.training.max_steps == 6 and saved.corpus.train == str(tiny_text)
    records = MetricsLog(output_dir / "metrics.jsonl").read()
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in records if r["kind"] == "dev"] == [6]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--paths.train", "/nonexistent/corpus.txt"], "corpus.train: corpus path not found: /nonexistent/corpus.txt"),
        (["--training.typo", "1"], r"unknown setting(s) in [training]: typo"),
        (["--resume"], "No checkpoint at"),
        pytest.param(
            ["--gpu-id", "0"], "--gpu-id 0: CUDA is not available (use --gpu-id -1 for the CPU)",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present"),
        ),
    ],
)
def test_errors_print_one_line(tmp_path, capsys, monkeypatch, tiny_text, args, message):
    config_path = tmp_path / "pretrain.cfg"
    run_cli(capsys, monkeypatch, "init-config", config_path, "--size", "tiny")
    base = ["--paths.train", str(tiny_text)] if "--paths.train" not in args else []
    code, out, err = run_cli(capsys, monkeypatch, "pretrain", config_path, tmp_path / "out", *base, *args, *FAST)
    assert code == 1
    assert message in out + err and "Traceback" not in out + err


def test_resume_needs_nothing_the_run_knows(tmp_path, capsys, monkeypatch, tiny_text):
    """The README's commands: `pretrain CFG out/ --paths.train ...`, then `pretrain CFG out/
    --resume`. The run's saved settings (its paths, the overrides it started with) fill what CFG
    and the command line leave at the defaults; a CFG that changes the model is still refused."""
    config_path = tmp_path / "my_pretrain.cfg"
    run_cli(capsys, monkeypatch, "init-config", config_path, "--size", "tiny")
    output_dir = tmp_path / "out"
    code, out, err = run_cli(
        capsys, monkeypatch, "pretrain", config_path, output_dir, "--paths.train", tiny_text, "--paths.dev", tiny_text,
        "--training.max_steps", "2", "--optimizer.name", "adam", *FAST,
    )
    assert code == 0, err
    code, out, err = run_cli(capsys, monkeypatch, "pretrain", config_path, output_dir, "--resume", "--training.max_steps", "3")
    assert code == 0, err
    assert "Resuming from step 2" in out and _train_steps(output_dir) == [1, 2, 3]
    saved = load_config(output_dir / "config.cfg")
    assert (saved.corpus.train, saved.corpus.dev, saved.corpus.tokenizer) == (str(tiny_text), str(tiny_text), "whitespace")
    assert (saved.optimizer.name, saved.training.max_steps, saved.model.size) == ("adam", 3, "tiny")
    other = tmp_path / "other.cfg"
    other.write_text(config_path.read_text(encoding="utf8").replace('size = "tiny"', 'size = "compact"'), encoding="utf8")
    code, out, err = run_cli(capsys, monkeypatch, "pretrain", other, output_dir, "--resume", "--training.max_steps", "4")
    assert code == 1 and err == (
        f"✘ --resume: the config's [model] differ from the run in {output_dir}; resume with the same model, "
        "vocab and softmax settings\n"
    )


def test_continuing_a_model_trains_with_adam_and_shows_where_it_starts(tmp_path, capsys, monkeypatch, tiny_text):
    """--init-from with the default optimizer (Adagrad at 0.2 would unlearn the model) trains
    with Adam at 0.001, says so in one line, and prints the held-out perplexity at step 0."""
    config_path = tmp_path / "pretrain.cfg"
    run_cli(capsys, monkeypatch, "init-config", config_path, "--size", "tiny")
    common = ["--paths.train", tiny_text, "--paths.dev", tiny_text, "--training.max_steps", "2", *FAST]
    assert run_cli(capsys, monkeypatch, "pretrain", config_path, tmp_path / "first", *common)[0] == 0
    start = tmp_path / "first"
    for name, extra, optimizer in (("more", [], ("adam", 0.001)), ("own", ["--optimizer.learn_rate", "0.1"], ("adagrad", 0.1))):
        code, out, err = run_cli(
            capsys, monkeypatch, "pretrain", config_path, tmp_path / name, "--init-from", start, *common,
            "--training.eval_at_start", "true", *extra,
        )
        assert code == 0, err
        saved = load_config(tmp_path / name / "config.cfg").optimizer
        assert (saved.name, saved.learn_rate) == optimizer
        notes = [line for line in out.splitlines() if "training with Adam" in line]
        assert notes == ([
            f"ℹ --init-from {start}: training with Adam at learn_rate 0.001, which continues a trained biLM (the "
            "default optimizer, Adagrad at 0.2, trains one from scratch and makes it worse); set optimizer.name or "
            "optimizer.learn_rate to choose another"
        ] if name == "more" else [])
        assert any(line.startswith("step 0: held-out perplexity ") for line in out.splitlines()), out


ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1"}


def _pretrain_command(tmp_path, tiny_text, output_dir, *, max_steps: int, checkpoint_every: int):
    """`python -m spacy_elmo pretrain` on the tiny corpus, as a subprocess's arguments."""
    config_path = tmp_path / "pretrain.cfg"
    config_path.write_text(default_config_text(size="tiny"), encoding="utf8")
    return [
        sys.executable, "-m", "spacy_elmo", "pretrain", str(config_path), str(output_dir),
        "--paths.train", str(tiny_text), "--training.max_steps", str(max_steps),
        "--training.checkpoint_every", str(checkpoint_every), *FAST,
    ]


def _train_steps(output_dir: Path):
    return [r["step"] for r in MetricsLog(output_dir / "metrics.jsonl").read() if r["kind"] == "train"]


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_last_checkpoint(tmp_path, tiny_text):
    """SIGKILL at an arbitrary moment, then --resume: every step is logged once, up to the end."""
    output_dir = tmp_path / "out"
    args = _pretrain_command(tmp_path, tiny_text, output_dir, max_steps=400, checkpoint_every=7)
    process = subprocess.Popen(args, env=ONE_THREAD, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if (output_dir / "checkpoint.pt").exists() and len(MetricsLog(output_dir / "metrics.jsonl").read()) >= 10:
                break
            time.sleep(0.05)
        else:
            pytest.fail("no checkpoint within 600 s")
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    killed_at = len(MetricsLog(output_dir / "metrics.jsonl").read())
    resumed_from = load_checkpoint(output_dir / "checkpoint.pt")["step"]
    assert 7 <= resumed_from <= killed_at and killed_at - resumed_from <= 7
    final_step = resumed_from + 10
    args[args.index("400")] = str(final_step)
    result = subprocess.run(args + ["--resume"], env=ONE_THREAD, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Resuming from step {resumed_from}" in result.stdout
    steps = _train_steps(output_dir)
    assert steps == list(range(1, final_step + 1))
    assert not list(output_dir.glob(".*.tmp"))  # a write cut short by the kill is cleaned up on resume


@pytest.mark.slow
def test_sigterm_stops_like_ctrl_c_and_leaves_no_temp_files(tmp_path, tiny_text):
    output_dir = tmp_path / "out"
    args = _pretrain_command(tmp_path, tiny_text, output_dir, max_steps=100_000, checkpoint_every=5)
    process = subprocess.Popen(args, env=ONE_THREAD, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        while not (output_dir / "checkpoint.pt").exists():
            assert time.monotonic() < deadline and process.poll() is None, "no checkpoint within 600 s"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode != 0
    assert "--resume continues from step" in output
    assert not list(output_dir.glob(".*.tmp"))


@pytest.mark.slow
def test_a_directory_in_use_by_a_run_is_refused_to_a_second_run(tmp_path, tiny_text):
    """A run holds its output directory; another run or a --resume there gets one line."""
    output_dir = tmp_path / "out"
    args = _pretrain_command(tmp_path, tiny_text, output_dir, max_steps=10_000_000, checkpoint_every=10_000_000)
    first = subprocess.Popen(args, env=ONE_THREAD, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while not MetricsLog(output_dir / "metrics.jsonl").read():
            assert time.monotonic() < deadline and first.poll() is None, "the first run did not start"
            time.sleep(0.05)
        second = subprocess.run(
            args + ["--training.max_steps", "3"], env=ONE_THREAD, capture_output=True, text=True, timeout=300
        )
        resumed = subprocess.run(args + ["--resume"], env=ONE_THREAD, capture_output=True, text=True, timeout=300)
        assert first.poll() is None
    finally:
        first.kill()
        first.wait(timeout=30)
    for result in (second, resumed):
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and len(lines) == 1, result.stderr
        assert f"{output_dir} is in use by another run (process {first.pid}:" in lines[0]
    steps = _train_steps(output_dir)
    assert steps == list(range(1, len(steps) + 1))  # the first run's steps only, each once
    # A killed run leaves no stale lock: a new run may use the directory at once.
    again = subprocess.run(args + ["--training.max_steps", "2"], env=ONE_THREAD, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize(
    "resume,args,mode,overrides",
    [
        (True, ["auto"], "auto", []),
        (True, ["auto", "--softmax.kind", "auto"], "auto", ["--softmax.kind", "auto"]),
        (True, ["--softmax.kind", "auto"], True, ["--softmax.kind", "auto"]),
        (True, ["--paths.train", "t.txt"], True, ["--paths.train", "t.txt"]),
        (False, ["--softmax.kind", "auto"], False, ["--softmax.kind", "auto"]),
    ],
)
def test_resume_auto_is_told_from_a_setting_whose_value_is_auto(resume, args, mode, overrides):
    """Typer passes --resume as a flag and the rest as overrides: `auto` right after the flag
    is its mode, `auto` after a --section.key is that setting's value."""
    assert resume_mode(resume, args) == (mode, overrides)


def test_resume_auto_continues_this_run_after_a_stop(tmp_path, tiny_text, capsys, monkeypatch):
    """A fresh start with --resume auto, stopped after its first checkpoint; the same command
    (--resume=auto, as click spells an option's value too) goes on from there."""
    output_dir = tmp_path / "out"
    args = _pretrain_command(tmp_path, tiny_text, output_dir, max_steps=4, checkpoint_every=2)[3:] + ["--resume", "auto"]
    original_step = kill_at_step(monkeypatch, 3)
    code, _, _ = run_cli(capsys, monkeypatch, *args)
    assert code != 0 and load_checkpoint(output_dir / "checkpoint.pt")["step"] == 2
    monkeypatch.setattr(Trainer, "train_step", original_step)
    code, out, err = run_cli(capsys, monkeypatch, *args[:-2], "--resume=auto")
    assert code == 0, out + err
    assert "Resuming from step 2" in out and "moved it to" not in out + err
    assert _train_steps(output_dir) == [1, 2, 3, 4]
    assert not (tmp_path / "out.previous").exists()


def test_resume_auto_moves_another_run_aside_and_keeps_older_ones(tmp_path, tiny_text, capsys, monkeypatch):
    """A run of other settings is moved aside with one line and a new run starts; an
    older `.previous` is kept, not deleted."""
    output_dir = tmp_path / "out"
    args = _pretrain_command(tmp_path, tiny_text, output_dir, max_steps=2, checkpoint_every=2)[3:]
    assert run_cli(capsys, monkeypatch, *args)[0] == 0
    older = tmp_path / "out.previous"
    older.mkdir()
    (older / "notes.txt").write_text("kept", encoding="utf8")
    code, out, err = run_cli(capsys, monkeypatch, *args, "--optimizer.learn_rate", "0.5", "--resume", "auto")
    assert code == 0, out + err
    moved = tmp_path / "out.previous.2"
    notices = [line for line in (out + err).splitlines() if "moved it to" in line]
    assert len(notices) == 1 and "other settings in [optimizer]" in notices[0] and str(moved) in notices[0]
    assert (older / "notes.txt").read_text(encoding="utf8") == "kept"
    assert load_checkpoint(moved / "checkpoint.pt")["step"] == 2
    assert "Resuming" not in out and _train_steps(output_dir) == [1, 2]
    assert load_config(output_dir / "config.cfg").optimizer.learn_rate == 0.5


@pytest.mark.slow
def test_resume_auto_leaves_a_directory_in_use_alone(tmp_path, tiny_text, capsys, monkeypatch):
    """Another run writes there: nothing is moved or written, one line names that process."""
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    (output_dir / "checkpoint.pt").write_bytes(b"a run with other settings")
    args = _pretrain_command(tmp_path, tiny_text, output_dir, max_steps=2, checkpoint_every=2)[3:] + ["--resume", "auto"]
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from spacy_elmo.directory_lock import hold_directory\n"
         "with hold_directory(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(3600)", str(output_dir)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = run_cli(capsys, monkeypatch, *args)
    finally:
        holder.kill()
        holder.wait()
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{output_dir} is in use by another run (process {holder.pid}" in lines[0]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out", "pretrain.cfg"]
    assert [path.name for path in output_dir.iterdir()] == ["checkpoint.pt"]
