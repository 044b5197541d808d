"""The learning-rate schedule: warm-up, constant, anneal."""
import pytest

from spacy_elmo.pretraining.config import parse_config
from spacy_elmo.errors import ConfigError
from spacy_elmo.pretraining.schedule import learn_rate_at


def _optimizer(**settings):
    overrides = {f"optimizer.{key}": value for key, value in settings.items()}
    text = "[paths]\ntrain = \"train.txt\"\n[training]\nmax_steps = 100"
    return parse_config(text, {"optimizer.learn_rate": 0.5, **overrides}).optimizer


def test_constant_without_warm_up_or_anneal():
    config = _optimizer()
    assert {learn_rate_at(config, step, 100) for step in range(100)} == {0.5}


def test_warm_up_then_constant_then_anneal():
    config = _optimizer(warmup_steps=4, anneal_steps=10, anneal_to=0.2)
    rates = [learn_rate_at(config, step, 100) for step in range(100)]
    assert rates[:4] == pytest.approx([0.125, 0.25, 0.375, 0.5])
    assert set(rates[4:90]) == {0.5}
    assert rates[90] == pytest.approx(0.5 * (1 - 0.1 * 0.8))
    assert rates[99] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(rates[90:], rates[91:]))


@pytest.mark.parametrize("setting,value", [("warmup_steps", -1), ("anneal_steps", -5), ("anneal_to", 1.5)])
def test_bad_schedule_settings_are_one_line_errors(setting, value):
    with pytest.raises(ConfigError, match=f"optimizer.{setting}"):
        _optimizer(**{setting: value})
