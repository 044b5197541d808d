"""Errors: `one_line` messages and the classes the CLI prints without a traceback."""
import pytest

from spacy_elmo.errors import (
    CheckpointError,
    ConfigError,
    DocDataError,
    InputError,
    OptionsError,
    SettingsError,
    SpacyElmoError,
    TrainingError,
    WeightsError,
    is_finite_number,
    one_line,
)


def test_one_line_collapses_newlines_tabs_and_runs_of_spaces():
    assert one_line("  a\n\tb   c\r\n") == "a b c"


def test_one_line_reads_the_message_of_an_exception():
    assert one_line(ValueError("bad\nvalue")) == "bad value"


def test_one_line_cuts_the_collapsed_text_at_the_limit():
    assert one_line("ab\n\ncd ef", limit=4) == "ab c"


def test_one_line_without_a_limit_keeps_all_of_a_long_message():
    assert one_line("x" * 10_000) == "x" * 10_000


def test_one_line_of_an_empty_message_is_empty():
    assert one_line(RuntimeError()) == ""


@pytest.mark.parametrize(
    "kind", [OptionsError, SettingsError, WeightsError, InputError, DocDataError, ConfigError, CheckpointError,
             TrainingError],
)
def test_every_error_is_a_spacy_elmo_error(kind):
    assert issubclass(kind, SpacyElmoError)


@pytest.mark.parametrize("kind", [OptionsError, SettingsError, WeightsError, InputError, DocDataError, ConfigError])
def test_errors_of_bad_values_are_value_errors(kind):
    assert issubclass(kind, ValueError)


def test_a_settings_error_is_caught_as_an_options_error():
    with pytest.raises(OptionsError, match="dropout"):
        raise SettingsError("dropout = 2: not in [0, 1)")


def test_a_training_error_is_a_runtime_error_and_a_checkpoint_error_neither_of_those():
    assert issubclass(TrainingError, RuntimeError)
    assert not issubclass(CheckpointError, (ValueError, RuntimeError))


def test_a_finite_number_is_an_int_or_float_a_float_can_hold():
    assert is_finite_number(3) and is_finite_number(-0.5) and is_finite_number(10**300)
    for value in (True, "1", None, float("nan"), float("inf"), 10**400):  # 10**400 overflows a float
        assert not is_finite_number(value)
