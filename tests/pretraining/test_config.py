"""The pretraining config: defaults, overrides, validation errors, shipped configs."""
import dataclasses
from pathlib import Path

import pytest

from spacy_elmo.models.pytorch.options import NAMED_SIZES
from spacy_elmo.pretraining.config import load_config, parse_config
from spacy_elmo.pretraining.default_config import default_config_text
from spacy_elmo.pretraining.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_default_config_is_valid_and_commented():
    text = default_config_text(size="medium", lang="de")
    config = parse_config(text, {"paths.train": "train.txt"})
    assert config.corpus.train == "train.txt" and config.corpus.dev is None
    assert config.corpus.tokenizer == "de" and config.bilm_options() == NAMED_SIZES["medium"]
    assert config.optimizer.name == "adagrad" and config.optimizer.learn_rate == 0.2
    assert config.softmax.n_negative_samples == 8192 and config.training.grad_clip == 10.0
    for section in text.split("\n[")[1:]:
        assert "\n# " in section, f"[{section.splitlines()[0]} has no comments"

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
        ({"paths.train": "x", "training.tokens_per_step": 0}, "training.tokens_per_step must be positive"),
        ({"paths.train": "x", "optimizer.name": "sgd"}, "optimizer.name must be one of 'adagrad', 'adam'"),
        ({"paths.train": "x", "model.size": "huge"}, "model.size must be one of"),
        ({"paths.train": "x", "model.filters": [[0, 4]]}, r"invalid char_cnn.filters"),
        ({"paths.train": "x", "training.max_steps": None, "training.max_epochs": None}, "set training.max_steps or training.max_epochs"),
        ({"paths.train": "x", "training.typo": 3}, r"unknown setting\(s\) in \[training\]: typo"),
        ({"paths.train": "x", "optimizer.initial_accumulator": -1}, r"optimizer.initial_accumulator must be >= 0, got -1"),
        ({"paths.train": "x", "optimizer.beta1": 1.5}, r"optimizer.beta1 must be in \[0, 1\), got 1.5"),
        ({"paths.train": "x", "optimizer.eps": -1}, r"optimizer.eps must be > 0, got -1"),
        ({"paths.train": "x", "optimizer.weight_decay": -1}, r"optimizer.weight_decay must be >= 0, got -1"),
        ({"paths.train": "x", "model.lstm_dim": 1000000000}, r"a biLM of [\d,]+ parameters, more than the 2,000,000,000"),
    ],
)
def test_invalid_settings_are_named(overrides, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(default_config_text(size="fixture"), overrides)


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
