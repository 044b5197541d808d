"""tools/pretrain_in_time.py: calibrate, size one schedule to the time left, bring the biLM back in parts."""
from pathlib import Path

import pytest

from spacy_elmo.pretraining.config import load_config
from spacy_elmo.pretraining.default_config import default_config_text

from ..pretraining.util import fast_overrides
from ..project.conftest import load_script

pretrain_in_time = load_script("pretrain_in_time", folder="tools")


def test_overrides_are_json_values_or_strings():
    parsed = pretrain_in_time.parse_overrides(["--training.max_steps", "10", "--corpus.tokenizer", "whitespace"])
    assert parsed == {"training.max_steps": 10, "corpus.tokenizer": "whitespace"}
    with pytest.raises(SystemExit, match="pairs"):
        pretrain_in_time.parse_overrides(["--training.max_steps"])


def test_planned_steps_leave_time_for_pauses_and_the_finish():
    assert pretrain_in_time.plan_steps(505, 100_000, 10_000) == int(0.8 * 400 * 10)
    assert pretrain_in_time.plan_steps(30, 100_000, 10_000) == 50


def test_a_run_sized_to_its_time_is_brought_back_in_parts(tmp_path: Path, reference_dir: Path, monkeypatch, one_torch_thread):
    tiny_text = reference_dir / "bilm-tf" / "train" / "data.txt"
    config = tmp_path / "config.cfg"
    config.write_text(default_config_text(size="fixture"), encoding="utf8")
    overrides = fast_overrides(tiny_text, tiny_text)
    monkeypatch.setattr(pretrain_in_time, "PART_BYTES", 100_000)
    result = pretrain_in_time.run(
        config, tmp_path / "run", seconds=60, overrides=overrides, init_from=None, precisions=["fp32"],
        calibration_steps=12, peak=0.002, started=pretrain_in_time.time.time(),
    )
    assert result["step"] == 50  # the fewest steps a plan makes
    assert (tmp_path / "run.calibrate_fp32" / "weights.hdf5").exists()
    planned = load_config(tmp_path / "run" / "config.cfg")
    assert (planned.training.max_steps, planned.optimizer.warmup_steps, planned.optimizer.anneal_steps) == (50, 10, 25)
    names = pretrain_in_time.bring_back(tmp_path / "run", tmp_path / "back")
    assert "metrics.jsonl" in names and "weights.hdf5.part01" in names
    joined = b"".join((tmp_path / "back" / name).read_bytes() for name in names if name.startswith("weights.hdf5.part"))
    assert joined == (tmp_path / "run" / "weights.hdf5").read_bytes()
