"""ELMoForManyLangs zip archives: which members make the model, what is refused before
anything is unpacked, and the model folder that appears whole (once) beside the archive."""
import struct
import zipfile
from pathlib import Path

import pytest

from spacy_elmo.errors import WeightsError
from spacy_elmo.models.pytorch import elmoformanylangs_archive
from spacy_elmo.models.pytorch.elmoformanylangs_archive import (
    archive_members,
    unpack_archive,
)
from spacy_elmo.models.pytorch.elmoformanylangs_format import load as load_elmoformanylangs

MANYLANGS = Path(__file__).resolve().parents[2] / "fixtures" / "elmoformanylangs" / "with_words"
MODEL_FILES = ["char.dic", "cnn_6_5_8_16_sample.json", "config.json", "encoder.pkl", "token_embedder.pkl", "word.dic"]


def write_archive(path: Path, replace=None, extra=(), method=zipfile.ZIP_DEFLATED) -> Path:
    """The with_words fixture zipped under pt.model/ (char.dic first); `replace`: other contents by name."""
    with zipfile.ZipFile(path, "w", method) as archive:
        for name in MODEL_FILES:
            archive.writestr("pt.model/" + name, (replace or {}).get(name, (MANYLANGS / name).read_bytes()))
        for name, data in extra:
            archive.writestr(name, data)
    return path


def test_the_members_are_the_model_files_beside_the_shallowest_config_and_the_config_it_names(tmp_path):
    extra = [("pt.model/old/config.json", b"{}"), ("pt.model/other.json", b"{}"), ("encoder.pkl", b"x")]
    members = archive_members(write_archive(tmp_path / "168.zip", extra=extra), "168.zip")
    assert sorted(members) == MODEL_FILES
    assert {info.filename for info in members.values()} == {"pt.model/" + name for name in MODEL_FILES}


def test_the_shallowest_config_wins_over_a_deeper_one_with_a_shorter_path(tmp_path):
    extra = [("x/y/config.json", b"{}")]  # 15 characters against pt.model/config.json's 20, but two folders down
    members = archive_members(write_archive(tmp_path / "168.zip", extra=extra), "168.zip")
    assert members["config.json"].filename == "pt.model/config.json"


@pytest.mark.parametrize("offset,value,message", [
    (8, 0x1, r"^168.zip: its pt.model/char.dic is encrypted"),  # the general purpose flags
    (10, 99, r"^168.zip: its pt.model/char.dic is compressed with method 99, which spacy-elmo cannot read"),
])
def test_a_member_zipfile_cannot_read_is_refused(tmp_path, offset, value, message):
    path = write_archive(tmp_path / "168.zip", method=zipfile.ZIP_STORED)
    data = bytearray(path.read_bytes())
    at = data.index(b"PK\x01\x02") + offset  # char.dic's central directory entry
    data[at:at + 2] = struct.pack("<H", value)
    path.write_bytes(bytes(data))
    with pytest.raises(WeightsError, match=message):
        archive_members(path, "168.zip")


def test_configs_and_vocabularies_over_their_bounds_are_refused_and_state_dicts_are_not_bounded_so(
    tmp_path, monkeypatch
):
    padded = {"cnn_6_5_8_16_sample.json": (MANYLANGS / "cnn_6_5_8_16_sample.json").read_bytes() + b" " * (1 << 20)}
    with pytest.raises(WeightsError, match=r"sample.json declares 1,049,034 bytes, more than 1,048,576; refused"):
        archive_members(write_archive(tmp_path / "a.zip", replace=padded), "a.zip")
    monkeypatch.setattr(elmoformanylangs_archive, "MAX_CONFIG_BYTES", 458)  # the state dicts: 10-23 KB
    monkeypatch.setattr(elmoformanylangs_archive, "MAX_VOCABULARY_BYTES", 243)
    assert sorted(archive_members(write_archive(tmp_path / "b.zip"), "b.zip")) == MODEL_FILES
    monkeypatch.setattr(elmoformanylangs_archive, "MAX_VOCABULARY_BYTES", 242)  # char.dic's size, word.dic's + 1
    with pytest.raises(WeightsError, match=r"^b.zip: its pt.model/word.dic declares 243 bytes, more than 242"):
        archive_members(tmp_path / "b.zip", "b.zip")


@pytest.mark.parametrize("content,message", [
    (b"<html>Not found</html>", r"^168.zip is not a readable zip archive \("),
    ({"config.json": b"{not json"}, r"^168.zip: its config.json does not read as JSON"),
])
def test_a_file_that_is_not_a_zip_or_a_config_that_is_not_json_is_one_line(tmp_path, content, message):
    path = tmp_path / "168.zip"
    write_archive(path, replace=content) if isinstance(content, dict) else path.write_bytes(content)
    with pytest.raises(WeightsError, match=message):
        archive_members(path, "168.zip")


def test_the_model_folder_is_unpacked_beside_the_archive_once_and_replaces_a_killed_runs_partial(tmp_path):
    (tmp_path / ".model.partial").mkdir()
    (tmp_path / ".model.partial" / "left.over").write_bytes(b"x")
    path = write_archive(tmp_path / "168.zip", extra=[("pt.model/run.sh", b"x")])
    folder = unpack_archive(path)
    assert folder == tmp_path / "model" and sorted(p.name for p in folder.iterdir()) == MODEL_FILES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["168.zip", "model"]
    load_elmoformanylangs(folder)
    path.write_bytes(b"no longer a zip")
    assert unpack_archive(path) == folder  # not read again


@pytest.mark.parametrize("replace,corrupt,state_unpacked,message", [
    ({"encoder.pkl": bytes(2 << 20)}, False, False,
     r"168.zip/encoder.pkl: 2,097,152 bytes, far more than the 19,456 its model config implies"),
    ({"encoder.pkl": b"not a pickle"}, False, True, r"168.zip/encoder.pkl: the weights cannot be read safely"),
    (None, True, False, r"168.zip: the archive does not unpack \(Bad CRC-32 for file 'pt.model/word.dic'\); delete"),
], ids=["state dict too large", "model does not load", "damaged member"])
def test_a_model_that_does_not_unpack_or_load_leaves_no_folder_and_is_named_by_its_archive(
    tmp_path, monkeypatch, replace, corrupt, state_unpacked, message
):
    path = write_archive(tmp_path / "168.zip", replace=replace, method=zipfile.ZIP_STORED)
    if corrupt:
        data = bytearray(path.read_bytes())
        data[data.index((MANYLANGS / "word.dic").read_bytes())] ^= 1
        path.write_bytes(bytes(data))
    unpacked, unpack = [], elmoformanylangs_archive._unpack
    monkeypatch.setattr(elmoformanylangs_archive, "_unpack", lambda a, m, into: unpacked.extend(m) or unpack(a, m, into))
    with pytest.raises(WeightsError, match=message) as err:
        unpack_archive(path)
    assert ".partial" not in str(err.value) and [p.name for p in tmp_path.iterdir()] == ["168.zip"]
    assert ("encoder.pkl" in unpacked) is state_unpacked  # a state dict too large: refused before it is written
