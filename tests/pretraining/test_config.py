"""The pretraining config: defaults, overrides, validation errors, shipped configs."""
import dataclasses
from pathlib import Path
from typing import Optional

import pytest

from spacy_elmo.models.pytorch.options import NAMED_SIZES
from spacy_elmo.pretraining.config import load_config, parse_config
from spacy_elmo.pretraining.default_config import default_config_text
from spacy_elmo.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
FINITE = r"a finite number \(a 32-bit float, at most 3.403e\+38\)"


def test_named_size_with_explicit_numbers():
    config = parse_config(
        default_config_text(size="small"),
        {"paths.train": "x", "model.lstm_dim": 256, "model.filters": [[1, 8], [2, 8]], "model.n_highway": 0},
    )
    options = config.bilm_options()
    assert (options.lstm_dim, options.projection_dim, options.n_filters, options.n_highway) == (256, 128, 16, 0)


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({}, "corpus.train must be set"),
        ({"paths.train": "x", "training.dropout": 1.5}, r"training.dropout must be in \[0, 1\)"),
        ({"paths.train": "x", "training.tokens_per_step": "many"}, "training.tokens_per_step must be a int, got 'many'"),
        ({"paths.train": "x", "training.tokens_per_step": 0}, "training.tokens_per_step must be from 1 to 1,048,576, got 0"),
        ({"paths.train": "x", "optimizer.name": "sgd"}, "optimizer.name must be one of 'adagrad', 'adam'"),
        ({"paths.train": "x", "model.size": "huge"}, "model.size must be one of"),
        ({"paths.train": "x", "model.filters": [[0, 4]]}, r"invalid char_cnn.filters"),
        ({"paths.train": "x", "training.max_steps": None, "training.max_epochs": None}, "set training.max_steps or training.max_epochs"),
        ({"paths.train": "x", "training.typo": 3}, r"unknown setting\(s\) in \[training\]: typo"),
        ({"paths.train": "x", "optimizer.initial_accumulator": -1}, r"optimizer.initial_accumulator must be >= 0, got -1"),
        ({"paths.train": "x", "optimizer.beta1": 1.5}, r"optimizer.beta1 must be in \[0, 1\), got 1.5"),
        ({"paths.train": "x", "optimizer.eps": -1}, r"optimizer.eps must be positive, got -1"),
        ({"paths.train": "x", "optimizer.weight_decay": -1}, r"optimizer.weight_decay must be >= 0, got -1"),
        ({"paths.train": "x", "model.lstm_dim": 1000000000}, r"a biLM of [\d,]+ parameters, more than the 400,000,000"),
        ({"paths.train": "x", "optimizer.learn_rate": float("inf")}, rf"optimizer.learn_rate must be {FINITE}, got inf"),
        ({"paths.train": "x", "optimizer.learn_rate": float("nan")}, rf"optimizer.learn_rate must be {FINITE}, got nan"),
        ({"paths.train": "x", "optimizer.learn_rate": 1e300}, rf"optimizer.learn_rate must be {FINITE}, got 1e\+300"),
        ({"paths.train": "x", "optimizer.learn_rate": 10**400}, rf"learn_rate must be {FINITE}, got 1000.*\.\.\. \(401 characters\)"),
        (
            {"paths.train": "x", "optimizer.learn_rate": 3e38},
            r"optimizer.learn_rate must be in \(0, 1e\+06\] \(higher rates never train, and Adam's first step would overflow\)",
        ),
        ({"paths.train": "x", "optimizer.anneal_to": 1.5}, r"optimizer.anneal_to must be in \[0, 1\], got 1.5"),
        ({"paths.train": "x", "optimizer.warmup_steps": -1}, r"optimizer.warmup_steps must be >= 0, got -1"),
        ({"paths.train": "x", "system.seed": -5}, "system.seed must be from 0 to 4,294,967,295, got -5"),
        ({"paths.train": "x", "system.seed": 10**23}, "system.seed must be from 0 to 4,294,967,295, got 100000000000000000000000"),
        ({"paths.train": "x", "system.seed": 1.5}, "system.seed must be a int, got 1.5"),
        ({"paths.train": "x", "system.other": 1}, r"unknown setting\(s\) in \[system\]: other"),
        (
            {"paths.train": "x", "training.tokens_per_step": 10**23},
            r"training.tokens_per_step must be from 1 to 1,048,576 \(the batches of a step are held in memory together\)",
        ),
        ({"paths.train": "x", "training.eval_tokens_per_batch": 2**21}, "eval_tokens_per_batch must be from 1 to 1,048,576"),
        ({"paths.train": "x", "corpus.shuffle_buffer": 10**9}, "corpus.shuffle_buffer must be from 1 to 1,048,576"),
        (
            {"paths.train": "x", "training.tokens_per_step": 2**20, "training.sort_window": 32},
            r"training.sort_window × training.tokens_per_step is 33,554,432 tokens drawn at once, more than the 8,388,608",
        ),
        ({"paths.train": "x", "corpus.max_dev_sentences": 10**23}, r"must be at most 9,223,372,036,854,775,807 \(a 64-bit integer\)"),
    ],
)
def test_invalid_settings_are_named(overrides, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(default_config_text(size="tiny"), overrides)


def _float_settings():
    """Every float setting of the config, as "section.key"."""
    config = parse_config(default_config_text(size="tiny"), {"paths.train": "x"})
    for section in ("corpus", "vocab", "model", "softmax", "optimizer", "training"):
        for field in dataclasses.fields(getattr(config, section)):
            if field.type in (float, Optional[float]):
                yield f"{section}.{field.name}"


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("setting", list(_float_settings()))
def test_no_float_setting_takes_a_non_finite_value(setting, value):
    with pytest.raises(ConfigError, match=rf"{setting} must be {FINITE}, got {value!r}"):
        parse_config(default_config_text(size="tiny"), {"paths.train": "x", setting: value})


@pytest.mark.parametrize("text", ["learn_rate = NaN", "learn_rate = 1e999", "learn_rate = -Infinity"])
def test_a_non_finite_number_in_the_file_is_named(tmp_path, text):
    path = tmp_path / "pretrain.cfg"
    path.write_text(default_config_text(size="tiny").replace("learn_rate = 0.2", text), encoding="utf8")
    with pytest.raises(ConfigError, match=rf"pretrain.cfg: optimizer.learn_rate must be {FINITE}, got (nan|inf|-inf)"):
        load_config(path, {"paths.train": "x"})


def test_unknown_sections_and_files(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown section\(s\) \[nlp\]"):
        parse_config(default_config_text() + "\n[nlp]\nlang = \"en\"\n", {"paths.train": "x"})
    with pytest.raises(ConfigError, match="Config file not found"):
        load_config(tmp_path / "missing.cfg")
    (tmp_path / "broken.cfg").write_text("[training\nx = 1\n", encoding="utf8")
    with pytest.raises(ConfigError, match="broken.cfg"):
        load_config(tmp_path / "broken.cfg")


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("pretrain*.cfg")), ids=lambda p: p.name)
def test_shipped_configs_are_valid(path):
    config = load_config(path, {"paths.train": "train.txt"})
    assert config.corpus.train == "train.txt"
    options, named = config.bilm_options(), NAMED_SIZES[config.model.size]
    for key, value in dataclasses.asdict(config.model).items():
        if key != "size":  # each set value replaces the named size's
            expected = getattr(named, key) if value is None else value
            if key == "filters":
                expected = tuple(tuple(f) for f in expected)
            assert getattr(options, key) == expected, key


def test_settings_left_out_take_their_defaults():
    config = parse_config('[paths]\ntrain = "t.txt"\n\n[training]\nmax_steps = 5\n', {"training.dropout": 0.3})
    assert config.corpus.train == "t.txt" and config.training.max_steps == 5 and config.training.dropout == 0.3
    assert config.training.gradient_scale == 20.0 and config.model.size == "small"
    assert "gradient_scale = 20.0" in config.to_str()
