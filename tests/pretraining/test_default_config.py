"""The default pretraining config: every setting, commented, with its size and language filled in."""
import dataclasses

import pytest
from confection import Config

from spacy_elmo.errors import ConfigError
from spacy_elmo.models.pytorch.options import NAMED_SIZES
from spacy_elmo.pretraining.config import _SECTIONS, SystemConfig, parse_config
from spacy_elmo.pretraining.default_config import DEFAULT_CONFIG, default_config_text


def test_default_config_is_valid_and_commented():
    text = default_config_text(size="medium", lang="de")
    config = parse_config(text, {"paths.train": "train.txt"})
    assert config.corpus.train == "train.txt" and config.corpus.dev is None
    assert config.corpus.tokenizer == "de" and config.bilm_options() == NAMED_SIZES["medium"]
    assert config.optimizer.name == "adagrad" and config.optimizer.learn_rate == 0.2
    assert config.softmax.n_negative_samples == 8192 and config.training.grad_clip == 10.0
    for section in text.split("\n[")[1:]:
        assert "\n# " in section, f"[{section.splitlines()[0]} has no comments"


def test_the_defaults_are_the_small_size_and_english_with_no_placeholder_left():
    text = default_config_text()
    assert 'size = "small"' in text and 'tokenizer = "en"' in text
    assert "__SIZE__" not in text and "__LANG__" not in text
    assert text == DEFAULT_CONFIG.replace("__SIZE__", "small").replace("__LANG__", "en")


@pytest.mark.parametrize("size", list(NAMED_SIZES))
def test_every_named_size_gives_a_config_with_that_sizes_options(size):
    config = parse_config(default_config_text(size=size, lang="xx"), {"paths.train": "x"})
    assert config.model.size == size and config.bilm_options() == NAMED_SIZES[size]
    assert config.corpus.tokenizer == "xx"


def test_an_unknown_size_is_a_config_error_that_lists_the_named_sizes():
    with pytest.raises(ConfigError, match=rf"^unknown model size 'huge'; choose one of {', '.join(NAMED_SIZES)}$"):
        default_config_text(size="huge")


def test_the_default_config_sets_exactly_the_settings_of_each_section():
    """Every setting a config file may leave out has its default here, and nothing else is."""
    config = Config().from_str(default_config_text(), interpolate=False)
    sections = {**_SECTIONS, "system": SystemConfig}
    assert set(config) == {"paths", *sections}
    for name, cls in sections.items():
        assert set(config[name]) == {field.name for field in dataclasses.fields(cls)}, name
