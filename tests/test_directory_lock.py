"""One run per output directory: `hold_directory`'s flock, its message, and the directory it creates."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spacy_elmo.directory_lock import DirectoryInUseError, hold_directory
from spacy_elmo.errors import SpacyElmoError

#: Holds the directory argv[1] with a bare flock (no spacy_elmo import: starts fast) until killed.
HOLDER = (
    "import fcntl, os, sys, time\n"
    "fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)


def _refusal(path: Path, **kwargs) -> DirectoryInUseError:
    """The error of holding `path` while it is held."""
    with pytest.raises(DirectoryInUseError) as err, hold_directory(path, **kwargs):
        pass  # pragma: no cover
    return err.value


def test_a_missing_directory_is_created_with_its_parents_and_removed_when_left_empty(tmp_path):
    path = tmp_path / "a" / "out"
    with hold_directory(path):
        assert path.is_dir()
    assert not path.exists() and (tmp_path / "a").is_dir()


def test_a_created_directory_that_was_written_to_is_kept(tmp_path):
    with hold_directory(tmp_path / "out"):
        (tmp_path / "out" / "metrics.jsonl").write_text("{}\n", encoding="utf8")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["metrics.jsonl"]


def test_an_existing_empty_directory_is_not_removed(tmp_path):
    with hold_directory(tmp_path):
        pass
    assert tmp_path.is_dir()


def test_a_second_hold_in_this_process_is_refused_naming_this_process_and_what_holds_it(tmp_path):
    with hold_directory(tmp_path):
        error = _refusal(tmp_path, what="pretraining run")
    message = str(error)
    assert message.startswith(f"{tmp_path} is in use by another pretraining run (process {os.getpid()}: ")
    assert message.endswith("); wait for it to end, or choose another output directory")
    assert isinstance(error, SpacyElmoError) and "\n" not in message


def test_the_lock_is_released_when_the_block_ends_also_by_an_error(tmp_path):
    with pytest.raises(KeyError), hold_directory(tmp_path):
        raise KeyError("stop")
    with hold_directory(tmp_path):  # an fd left open would hold the lock: DirectoryInUseError
        pass


def test_without_proc_locks_the_holder_is_another_process(tmp_path, monkeypatch):
    def unreadable(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    with hold_directory(tmp_path):
        monkeypatch.setattr(Path, "read_text", unreadable)
        message = str(_refusal(tmp_path))
    assert message == (
        f"{tmp_path} is in use by another run (another process); wait for it to end, or choose another output directory"
    )


def test_a_directory_held_by_another_process_names_it_and_is_free_once_it_is_killed(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        message = str(_refusal(tmp_path))
    finally:
        holder.kill()
        holder.wait()
    assert f"in use by another run (process {holder.pid}: {sys.executable} -c import fcntl, os, sys" in message
    with hold_directory(tmp_path):  # SIGKILL left no stale lock
        pass
