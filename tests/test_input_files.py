"""Input files: regular files only, of a bounded size, refused with one error naming the path."""
import os

import pytest

from spacy_elmo.errors import InputError
from spacy_elmo.input_files import (
    MAX_VOCABULARY_BYTES,
    check_regular_file,
    read_regular_file,
)


def _read(path, max_bytes=8):
    return read_regular_file(path, max_bytes=max_bytes, error=InputError, what="Vocabulary")


def test_a_regular_file_is_read_whole(tmp_path):
    (tmp_path / "vocab.txt").write_bytes(b"<S>\n</S>\n")
    assert _read(tmp_path / "vocab.txt", max_bytes=MAX_VOCABULARY_BYTES) == b"<S>\n</S>\n"


def test_a_file_of_exactly_max_bytes_is_read_and_an_empty_one_is_empty(tmp_path):
    (tmp_path / "full").write_bytes(b"12345678")
    (tmp_path / "empty").write_bytes(b"")
    assert _read(tmp_path / "full") == b"12345678" and _read(tmp_path / "empty") == b""


def test_a_file_over_max_bytes_is_refused_with_the_limit_in_the_message(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 1001)
    with pytest.raises(InputError) as err:
        _read(path, max_bytes=1000)
    assert str(err.value) == f"{path}: more than 1,000 bytes, too large for vocabulary files"


def test_a_missing_file_is_not_found_and_raised_without_a_cause(tmp_path):
    with pytest.raises(InputError) as err:
        _read(tmp_path / "nope.txt")
    assert str(err.value) == f"Vocabulary file not found: {tmp_path / 'nope.txt'}"
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_a_link_to_a_regular_file_is_read_and_a_dangling_link_is_not_found(tmp_path):
    (tmp_path / "target").write_bytes(b"words")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    assert _read(tmp_path / "link") == b"words"
    with pytest.raises(InputError, match="Vocabulary file not found"):
        _read(tmp_path / "dangling")


def test_a_path_through_a_file_cannot_be_read_and_says_why(tmp_path):
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(InputError) as err:
        _read(tmp_path / "file" / "vocab.txt")
    assert str(err.value) == f"Cannot read vocabulary file {tmp_path / 'file' / 'vocab.txt'}: Not a directory"


def test_a_directory_is_refused_as_not_a_regular_file_and_its_descriptor_closed(tmp_path):
    open_before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        with pytest.raises(InputError) as err:
            _read(tmp_path)
        assert str(err.value) == f"Vocabulary path {tmp_path} is a directory, not a regular file"
    assert len(os.listdir("/proc/self/fd")) == open_before


def test_a_fifo_without_a_writer_is_refused_instead_of_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(InputError, match=r"is a FIFO \(named pipe\), not a regular file"):
        _read(tmp_path / "pipe")


def test_a_device_that_never_ends_is_refused():
    with pytest.raises(InputError, match="^Vocabulary path /dev/zero is a character device, not a regular file$"):
        _read("/dev/zero")


def test_the_given_error_class_is_raised():
    with pytest.raises(KeyError):
        read_regular_file("/dev/zero", max_bytes=1, error=KeyError, what="Options")


def test_check_regular_file_accepts_a_regular_file_a_link_to_one_and_a_missing_path(tmp_path):
    (tmp_path / "weights.hdf5").write_bytes(b"")
    (tmp_path / "link").symlink_to(tmp_path / "weights.hdf5")
    for path in (tmp_path / "weights.hdf5", tmp_path / "link", tmp_path / "missing.hdf5"):
        assert check_regular_file(path, InputError, "Weights") is None


def test_check_regular_file_refuses_a_link_to_a_fifo_and_a_directory(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to(tmp_path / "pipe")
    with pytest.raises(InputError) as err:
        check_regular_file(tmp_path / "link", InputError, "Weights")
    assert str(err.value) == f"Weights path {tmp_path / 'link'} is a FIFO (named pipe), not a regular file"
    with pytest.raises(InputError, match="is a directory, not a regular file"):
        check_regular_file(tmp_path, InputError, "Weights")


def test_file_sha256_is_the_digest_of_the_files_bytes(tmp_path):
    import hashlib

    from spacy_elmo.input_files import file_sha256

    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * (3 << 20) + b"end")  # more than one block
    assert file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()
