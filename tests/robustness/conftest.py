"""The standing bad-input and fault suite.

Every probe runs a command (or the component) on one hostile input and asserts
three things: the exit code, one line of error (no traceback), and that nothing
the user did not name as output was created, changed or left behind, temporary
files included. A probe is one row of a table: add a row for every new defect.
"""
import hashlib
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import pytest

from spacy_elmo.pretraining.default_config import default_config_text

from ..conftest import run_cli


@dataclass
class Probe:
    """A hostile input: `prepare(workspace)` makes it and returns the command's arguments."""

    name: str
    prepare: Callable[[Path], Sequence[object]]
    message: str
    code: int = 1
    # Files the failed command may leave (none: a failed command changes nothing).
    allowed: List[str] = field(default_factory=list)
    # Text that must not appear in the output (a password, a secret's bytes).
    absent: str = ""

    def __str__(self) -> str:
        return self.name


def snapshot(root: Path) -> Dict[str, Optional[str]]:
    """Every path under `root`: a file's content digest, None for a directory."""
    state: Dict[str, Optional[str]] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        state[key] = hashlib.sha1(path.read_bytes()).hexdigest() if path.is_file() else None
    return state


def assert_one_line_error(code: int, err: str, probe: Probe) -> None:
    assert code == probe.code, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    if probe.code == 2:  # a usage error: click's box around one message line
        assert sum(probe.message in line for line in lines) == 1, err
    else:
        assert len(lines) == 1 and lines[0].startswith("✘ "), err
        assert probe.message in lines[0], err


@pytest.fixture()
def workspace(tmp_path: Path, allennlp_model_dir: Path, reference_dir: Path) -> Path:
    """A user's directory: a model, a text to embed, a pretraining config and corpus."""
    root = tmp_path / "work"
    model = root / "model"
    model.mkdir(parents=True)
    shutil.copy(allennlp_model_dir / "options.json", model / "options.json")
    shutil.copy(allennlp_model_dir / "lm_weights.hdf5", model / "weights.hdf5")
    (root / "text.txt").write_text("The cat sat on the mat .\nA second line\n", encoding="utf8")
    (root / "pretrain.cfg").write_text(default_config_text(size="tiny"), encoding="utf8")
    shutil.copy(reference_dir / "bilm-tf" / "train" / "data.txt", root / "corpus.txt")
    return root


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory, reference_dir: Path) -> Path:
    """A real two-step pretraining run's directory, to copy and tamper with."""
    from spacy_elmo.pretraining.run import pretrain

    from ..pretraining.util import fast_config

    text = reference_dir / "bilm-tf" / "train" / "data.txt"
    output = tmp_path_factory.mktemp("run") / "out"
    pretrain(fast_config(text, text, training__max_steps=2, training__checkpoint_every=1), output)
    return output


@pytest.fixture(scope="session")
def saved_pipeline(tmp_path_factory, allennlp_model_dir: Path) -> Path:
    """A trained elmo + tagger pipeline on disk."""
    from ..pipeline.util import elmo_nlp, train

    nlp = elmo_nlp(allennlp_model_dir / "lm_weights.hdf5")
    train(nlp, 3)
    path = tmp_path_factory.mktemp("pipeline") / "pipeline"
    nlp.to_disk(path)
    return path


def run_probe(probe: Probe, workspace: Path, capsys, monkeypatch) -> None:
    """Run `probe` in `workspace` and check the three promises."""
    args = [str(arg) for arg in probe.prepare(workspace)]
    before = snapshot(workspace)
    monkeypatch.chdir(workspace)
    code, out, err = run_cli(capsys, monkeypatch, *args)
    assert_one_line_error(code, err, probe)
    assert not probe.absent or probe.absent not in out + err, err
    after = snapshot(workspace)
    changed = sorted(
        key for key in set(before) | set(after)
        if before.get(key, "absent") != after.get(key, "absent") and key not in probe.allowed
    )
    assert not changed, f"{probe.name}: changed or left behind {changed}"


def fifo_that_ends(path: Path, *, after: float = 5.0) -> Path:
    """A FIFO at `path` that a writer opens and closes `after` seconds on (and for 30 s
    more, until a reader waits): code that blocks on it gets its end, so a probe that
    would hang fails instead."""
    os.mkfifo(path)

    def end() -> None:
        time.sleep(after)
        for _ in range(300):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # fails while no reader waits
                return
            except OSError:
                time.sleep(0.1)

    threading.Thread(target=end, daemon=True).start()
    return path
