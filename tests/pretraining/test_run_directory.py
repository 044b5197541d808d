"""A run's output directory: moving a run aside, cleaning up after a run that never trained."""
import pytest

from spacy_elmo.errors import InputError
from spacy_elmo.pretraining.run_directory import RunDirectory


def test_move_aside_takes_the_first_free_previous_name_and_deletes_nothing(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "checkpoint.pt").write_bytes(b"the run")
    (tmp_path / "out.previous").mkdir()
    (tmp_path / "out.previous" / "notes.txt").write_text("older")
    moved = RunDirectory(tmp_path / "out").move_aside()
    assert moved == tmp_path / "out.previous.2" and (moved / "checkpoint.pt").read_bytes() == b"the run"
    assert (tmp_path / "out.previous" / "notes.txt").read_text() == "older"
    assert not (tmp_path / "out").exists()


def test_remove_entries_since_removes_only_what_was_added(tmp_path):
    directory = RunDirectory(tmp_path)
    (tmp_path / "notes.txt").write_text("the user's")
    before = directory.entries()
    (tmp_path / "vocab.txt").write_text("<S>\n")
    (directory.tokenized / "part").mkdir(parents=True)
    directory.remove_entries_since(before)
    assert directory.entries() == {"notes.txt"}


def test_a_directory_without_a_model_is_not_a_finished_run(tmp_path):
    (tmp_path / "vocab.txt").write_text("<S>\n")
    with pytest.raises(InputError, match=r"is not a finished pretraining run: no config.cfg, softmax.hdf5$"):
        RunDirectory(tmp_path).check_finished()
