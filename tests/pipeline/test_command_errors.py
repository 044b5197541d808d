"""spacy-elmo's errors inside spaCy's commands: of their own class and a ConfigValidationError, on one line."""
import re

import pytest
from confection import ConfigValidationError
from spacy.cli._util import show_validation_error

from spacy_elmo.errors import InputError, SpacyElmoError, WeightsError
from spacy_elmo.pipeline.command_errors import (
    TITLE,
    one_line_in_spacy_commands,
    shown_by_spacy,
)


def _raised_through(error: BaseException) -> BaseException:
    with pytest.raises(BaseException) as caught, one_line_in_spacy_commands():
        raise error
    return caught.value


def test_a_spacy_elmo_error_is_raised_as_its_own_class_and_a_config_validation_error():
    error = _raised_through(WeightsError("lm_weights.hdf5: no dataset 'char_embed'"))
    assert isinstance(error, WeightsError) and isinstance(error, ConfigValidationError)
    assert type(error).__name__ == "WeightsError" and type(error).__module__ == "spacy_elmo.errors"


def test_the_error_has_the_short_title_and_its_message_on_one_line_as_description_and_text():
    error = _raised_through(InputError("Could not download\n  ELMo model 'x'\tfrom the server"))
    assert error.title == TITLE and error.show_config is False
    assert error.desc == str(error) == "Could not download ELMo model 'x' from the server"


def test_the_error_is_raised_without_the_original_as_cause_or_context():
    error = _raised_through(WeightsError("bad"))
    assert error.__cause__ is None and error.__suppress_context__


def test_other_errors_pass_through_unchanged():
    original = OSError(2, "No such file")
    assert _raised_through(original) is original


def test_an_error_that_is_already_a_config_validation_error_is_raised_as_it_is():
    original = shown_by_spacy(WeightsError)(title="Other title", desc="kept", show_config=False)
    assert _raised_through(original) is original and original.title == "Other title"


def test_a_block_that_raises_nothing_runs_to_its_end():
    done = []
    with one_line_in_spacy_commands():
        done.append(True)
    assert done == [True]


def test_shown_by_spacy_makes_one_class_per_kind():
    assert shown_by_spacy(WeightsError) is shown_by_spacy(WeightsError)
    assert shown_by_spacy(WeightsError) is not shown_by_spacy(InputError)
    assert issubclass(shown_by_spacy(SpacyElmoError), SpacyElmoError)


def test_spacy_commands_print_the_title_and_the_message_alone_and_exit_with_1(capsys):
    with pytest.raises(SystemExit) as exit_info, show_validation_error(), one_line_in_spacy_commands():
        raise InputError("Could not download ELMo model 'x':\nconnection refused")
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # wasabi's colours
    assert exit_info.value.code == 1
    assert out.splitlines()[-2:] == [f"✘ {TITLE}", "Could not download ELMo model 'x': connection refused"]
