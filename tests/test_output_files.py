"""Output files: checked before the work, written atomically, stale temporary files removed."""
import os

import pytest

from spacy_elmo.errors import SpacyElmoError
from spacy_elmo.output_files import (
    _TEMP_NAME, _host, atomic_output_path, check_output_dir, check_output_file, remove_stale_temp_files,
)


def test_atomic_output_path_names_its_temp_file_after_the_process(tmp_path):
    with atomic_output_path(tmp_path / "out.bin") as tmp:
        assert tmp.name.startswith(f".out.bin.spacy-elmo-{os.getpid()}@{_host()}-") and tmp.name.endswith(".tmp")
        assert _TEMP_NAME.match(tmp.name)["name"] == "out.bin"
        tmp.write_bytes(b"data")
    assert (tmp_path / "out.bin").read_bytes() == b"data"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def _temp_name(name: str, pid: int, host: str = "") -> str:
    return f".{name}.spacy-elmo-{pid}@{host or _host()}-a1b2c3d4.tmp"


def test_only_temp_files_of_dead_processes_are_removed(tmp_path, dead_pid):
    stale = tmp_path / _temp_name("out.bin", dead_pid)
    live = tmp_path / _temp_name("out.bin", os.getpid())
    other_output = tmp_path / _temp_name("other.bin", dead_pid)
    other_host = tmp_path / _temp_name("out.bin", dead_pid, host="elsewhere")
    unrelated = tmp_path / ".notes.tmp"
    for path in (stale, live, other_output, other_host, unrelated):
        path.write_bytes(b"x")
    assert remove_stale_temp_files(tmp_path, ["out.bin"]) == 1
    assert not stale.exists() and live.exists() and other_output.exists() and unrelated.exists()
    assert remove_stale_temp_files(tmp_path, None) == 1
    assert not other_output.exists() and live.exists() and unrelated.exists() and other_host.exists()
    assert remove_stale_temp_files(tmp_path / "missing", None) == 0


def test_files_that_only_look_like_temp_files_are_kept(tmp_path, dead_pid):
    """A user's `.mydata.999999-draft.tmp` is not ours, whatever its number."""
    kept = [tmp_path / f".mydata.{dead_pid}-draft.tmp", tmp_path / f".out.bin.{dead_pid}-abcdefgh.tmp"]
    for path in kept:
        path.write_bytes(b"x")
    assert remove_stale_temp_files(tmp_path, None) == 0
    assert all(path.exists() for path in kept)


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


def test_the_temporary_name_of_a_255_byte_name_fits_and_a_killed_run_s_is_removed(tmp_path, dead_pid):
    name = "é" * 100 + "n" * 50 + ".hdf5"  # 255 bytes
    with atomic_output_path(tmp_path / name) as tmp:
        assert len(os.fsencode(tmp.name)) <= 255 and _TEMP_NAME.match(tmp.name)
        stale = tmp_path / tmp.name.replace(f"-{os.getpid()}@", f"-{dead_pid}@")
        stale.write_bytes(b"x")
    assert remove_stale_temp_files(tmp_path, [name]) == 1
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_special_files_are_never_replaced(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    for check in (lambda path: check_output_file(path), lambda path: atomic_output_path(path).__enter__()):
        with pytest.raises(SpacyElmoError, match="is a FIFO \\(named pipe\\), not a regular file: refusing to replace it"):
            check(tmp_path / "pipe")
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]


def test_a_stop_right_after_the_temp_file_is_created_leaves_none(tmp_path, monkeypatch):
    """SIGTERM raises KeyboardInterrupt wherever the code is: here, as the new file's descriptor closes."""
    real_close, calls = os.close, []

    def interrupted_close(fd):
        real_close(fd)
        if not calls:
            calls.append(fd)
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "close", interrupted_close)
    with pytest.raises(KeyboardInterrupt):
        with atomic_output_path(tmp_path / "out.json"):
            pass
    monkeypatch.undo()
    assert calls and list(tmp_path.iterdir()) == []
