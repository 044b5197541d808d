"""tools/pretrain_in_time.py: calibrate, size one schedule to the time left, stop at the deadline."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from spacy_elmo.pretraining.checkpoint import load_checkpoint
from spacy_elmo.pretraining.config import load_config
from spacy_elmo.pretraining.default_config import default_config_text
from spacy_elmo.pretraining.softmax import load_softmax

from ..pretraining.util import fast_overrides
from ..project.conftest import REPO, load_script

pretrain_in_time = load_script("pretrain_in_time", folder="tools")


@pytest.fixture
def setup(tmp_path: Path, reference_dir: Path, one_torch_thread):
    config = tmp_path / "config.cfg"
    config.write_text(default_config_text(size="tiny"), encoding="utf8")
    text = reference_dir / "bilm-tf" / "train" / "data.txt"
    return config, fast_overrides(text, text)


def test_overrides_are_json_values_or_strings():
    parsed = pretrain_in_time.parse_overrides(["--training.max_steps", "10", "--corpus.tokenizer", "whitespace"])
    assert parsed == {"training.max_steps": 10, "corpus.tokenizer": "whitespace"}
    with pytest.raises(pretrain_in_time.PlanError, match="pairs"):
        pretrain_in_time.parse_overrides(["--training.max_steps"])


def test_planned_steps_leave_time_for_set_up_pauses_and_the_finish():
    # 505 s - 10 s set-up - 45 s finish - 10 x 5 s pauses = 400 s at 80% of 100k tokens/s
    assert pretrain_in_time.plan_steps(505, 10, 100_000, 10_000) == 3_200
    with pytest.raises(pretrain_in_time.PlanError, match="too little"):
        pretrain_in_time.plan_steps(100, 10, 100_000, 10_000)


@pytest.mark.slow
def test_a_planned_run_follows_its_plan(tmp_path: Path, setup, monkeypatch):
    config, overrides = setup
    monkeypatch.setattr(pretrain_in_time, "plan_steps", lambda *args: 50)
    result = pretrain_in_time.run(
        config, tmp_path / "run", seconds=600, overrides=overrides, init_from=None, precisions=["fp32"],
        calibration_steps=20, peak=0.002, started=pretrain_in_time.time.time(),
    )
    assert result["step"] == 50
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.cfg", "run"]  # calibration removed
    planned = load_config(tmp_path / "run" / "config.cfg")
    assert (planned.training.max_steps, planned.optimizer.warmup_steps, planned.optimizer.anneal_steps) == (50, 10, 25)
    assert (tmp_path / "run" / "weights.hdf5").exists()
    with pytest.raises(pretrain_in_time.PlanError, match="already holds a run"):
        pretrain_in_time.run(
            config, tmp_path / "run", seconds=600, overrides=overrides, init_from=None, precisions=["fp32"],
            calibration_steps=20, peak=0.002, started=pretrain_in_time.time.time(),
        )


@pytest.mark.slow
def test_the_deadline_stops_the_run_and_its_last_checkpoint_is_exported(tmp_path: Path, setup, monkeypatch):
    config, overrides = setup
    monkeypatch.setattr(pretrain_in_time, "N_EVALUATIONS", 4_000)  # a checkpoint every 25 steps
    run_dir = tmp_path / "run"
    result = pretrain_in_time.train_until(
        config, run_dir, overrides=overrides, init_from=None, precision="fp32", steps=100_000, peak=0.002,
        stop_after=4.0, device=torch.device("cpu"),
    )
    assert result == {"stopped": True}
    checkpoint = load_checkpoint(run_dir / "checkpoint.pt")
    assert 25 <= checkpoint["step"] < 100_000 and checkpoint["step"] % 25 == 0
    (run_dir / "softmax.hdf5").unlink()  # as if the stop had cut the last export in two
    pretrain_in_time.export_last_checkpoint(run_dir)
    weight = checkpoint["model"]["softmax.weight"]
    softmax = load_softmax(run_dir / "softmax.hdf5", vocab_size=weight.shape[0], dim=weight.shape[1])
    assert torch.equal(softmax.weight.data, weight)


BLOCK_SPACY = "import sys\nfor name in ('spacy', 'thinc'):\n    sys.modules[name] = None\n"


def run_without_spacy(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_SPACY + code], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_tool_runs_without_spacy_or_thinc():
    """A GPU machine with PyTorch and no spaCy (pretokenized text) gets as far as the usage."""
    done = run_without_spacy("sys.argv = ['pretrain_in_time.py', '--help']\nimport runpy\n"
                             "runpy.run_path('tools/pretrain_in_time.py', run_name='__main__')")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def test_the_weights_loaders_import_without_spacy_or_thinc():
    """`--init-from` and benchmarks/bench_inference.py --model find their biLM there too."""
    done = run_without_spacy("from spacy_elmo.models.loaders import find_model\nprint(find_model('english-compact')[0].name)")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "weights.hdf5"
