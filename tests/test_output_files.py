"""Output files: checked before the work, written atomically, stale temporary files removed."""
import os

import pytest

from spacy_elmo.errors import SpacyElmoError
from spacy_elmo.output_files import (
    atomic_output_path, check_output_dir, check_output_file, remove_stale_temp_files,
)


def test_atomic_output_path_names_its_temp_file_after_the_process(tmp_path):
    with atomic_output_path(tmp_path / "out.bin") as tmp:
        assert tmp.name.startswith(f".out.bin.{os.getpid()}-") and tmp.name.endswith(".tmp")
        tmp.write_bytes(b"data")
    assert (tmp_path / "out.bin").read_bytes() == b"data"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_only_temp_files_of_dead_processes_are_removed(tmp_path, dead_pid):
    stale = tmp_path / f".out.bin.{dead_pid}-abc.tmp"
    live = tmp_path / f".out.bin.{os.getpid()}-abc.tmp"
    other_output = tmp_path / f".other.bin.{dead_pid}-abc.tmp"
    unrelated = tmp_path / ".notes.tmp"
    for path in (stale, live, other_output, unrelated):
        path.write_bytes(b"x")
    assert remove_stale_temp_files(tmp_path, ["out.bin"]) == 1
    assert not stale.exists() and live.exists() and other_output.exists() and unrelated.exists()
    assert remove_stale_temp_files(tmp_path) == 1
    assert not other_output.exists() and live.exists() and unrelated.exists()
    assert remove_stale_temp_files(tmp_path / "missing") == 0


def test_output_checks_create_nothing(tmp_path):
    check_output_file(tmp_path / "new" / "deeper" / "out.hdf5")
    check_output_dir(tmp_path / "run" / "one")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(SpacyElmoError, match="is a file, not a directory"):
        check_output_dir(tmp_path / "file")
    with pytest.raises(SpacyElmoError, match="is the input"):
        check_output_file(tmp_path / "file", inputs=[tmp_path / "file"])
    with pytest.raises(SpacyElmoError, match="is a directory"):
        check_output_file(tmp_path)
