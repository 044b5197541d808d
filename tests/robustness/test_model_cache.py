"""The model cache and ELMoForManyLangs archives (`embed --weights elmoformanylangs-pt`):
a hostile archive, a model that verifies but does not load, a full disk while unpacking,
two processes unpacking one archive, and archives or half folders given as a path. One
line, exit code 1, and nothing refused left in the cache."""
import errno
import multiprocessing
import shutil
import struct
import time
import zipfile
from pathlib import Path

import pytest

from spacy_elmo import output_files

from ..test_download import closed_port_url, serving
from ..test_published_models import MANYLANGS, MODEL_FILES
from .conftest import Probe, run_probe, snapshot

EMBED = ["embed", "text.txt", "out.hdf5", "--weights", "elmoformanylangs-pt"]
CACHED = Path("cache/elmoformanylangs/pt/168.zip")


def _archive(path: Path, *, replace=None, flag: int = 0, method=None) -> Path:
    """The fixture model zipped as NLPL does (in `pt.model/`): `replace` (name: bytes)
    swapped in, and `encoder.pkl`'s general-purpose flag or compression method set in the
    central directory (Python's zipfile writes neither encryption nor other methods)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in MODEL_FILES:
            archive.writestr(f"pt.model/{name}", (replace or {}).get(name, (MANYLANGS / name).read_bytes()))
    data = bytearray(path.read_bytes())
    entry = data.find(b"PK\x01\x02")
    while entry >= 0:
        name_length = struct.unpack_from("<H", data, entry + 28)[0]
        if data[entry + 46 : entry + 46 + name_length] == b"pt.model/encoder.pkl":
            struct.pack_into("<H", data, entry + 8, struct.unpack_from("<H", data, entry + 8)[0] | flag)
            if method is not None:
                struct.pack_into("<H", data, entry + 10, method)
        entry = data.find(b"PK\x01\x02", entry + 4)
    path.write_bytes(bytes(data))
    return path


def _other_size_config() -> bytes:
    """The model config with a wider LSTM than its encoder.pkl holds: every check of the
    download passes, the load does not."""
    return (MANYLANGS / "cnn_6_5_8_16_sample.json").read_text().replace('"dim": 16', '"dim": 32').encode()


# name, the archive served (keyword arguments of _archive), message
ARCHIVES = [
    ("an encoder.pkl of 4 MB of zeros (4 KB zipped)", {"replace": {"encoder.pkl": bytes(4_000_000)}},
     "168.zip/encoder.pkl: 4,000,000 bytes, far more than the"),
    ("an encrypted member", {"flag": 0x1}, "168.zip: its pt.model/encoder.pkl is encrypted"),
    ("an unknown compression method", {"method": 99},
     "168.zip: its pt.model/encoder.pkl is compressed with method 99, which spacy-elmo cannot read"),
    ("a model config of another size than its state dicts",
     {"replace": {"cnn_6_5_8_16_sample.json": _other_size_config()}},
     "encoder.pkl: 'forward_layer_0.input_linearity.weight' has shape (64, 8), but its settings say (128, 8)"),
]


@pytest.mark.parametrize("name,archive,message", ARCHIVES, ids=[a[0] for a in ARCHIVES])
def test_a_hostile_archive_gives_one_line_and_leaves_nothing_in_the_cache(
    name, archive, message, workspace, tmp_path, capsys, monkeypatch
):
    _archive(tmp_path / "served" / "11" / "168.zip", **archive)
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(workspace / "cache"))
    opened = []
    real_open = zipfile.ZipFile.open

    def recording_open(self, member, *args, **kwargs):
        opened.append(getattr(member, "filename", member))
        return real_open(self, member, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", recording_open)
    with serving(tmp_path / "served") as url:
        monkeypatch.setenv("SPACY_ELMO_BASE_URL", url)
        run_probe(Probe(name, lambda ws: EMBED, message), workspace, capsys, monkeypatch)
    if "zeros" in name:  # refused from what the archive declares, before a byte of it is unpacked
        assert "pt.model/encoder.pkl" not in opened


def _fill_the_disk(monkeypatch) -> None:
    monkeypatch.setattr(output_files, "bytes_writable", lambda path: 0)


def _fill_the_disk_while_writing(monkeypatch) -> None:
    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfileobj", no_space)


# name, fault, message: the archive is in the cache, whole, and stays there
FULL_DISKS = [
    ("no room to unpack a cached archive", _fill_the_disk, "elmoformanylangs/pt/model: not enough space: needs about"),
    ("the disk fills while unpacking a cached archive", _fill_the_disk_while_writing,
     "168.zip: cannot unpack it into"),
]


@pytest.mark.parametrize("name,fault,message", FULL_DISKS, ids=[f[0] for f in FULL_DISKS])
def test_a_full_disk_while_unpacking_keeps_the_archive_and_says_so(
    name, fault, message, workspace, capsys, monkeypatch
):
    _archive(workspace / CACHED)
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(workspace / "cache"))
    monkeypatch.setenv("SPACY_ELMO_BASE_URL", closed_port_url())
    fault(monkeypatch)
    run_probe(Probe(name, lambda ws: EMBED, message, absent="delete"), workspace, capsys, monkeypatch)


def _without_encoder(ws: Path) -> list:
    shutil.rmtree(ws / "model")
    shutil.copytree(MANYLANGS, ws / "model")
    (ws / "model" / "encoder.pkl").unlink()
    return ["embed", "text.txt", "out.hdf5", "--weights", "model"]


def _local_archive(ws: Path) -> list:
    _archive(ws / "model.zip")
    return ["embed", "text.txt", "out.hdf5", "--weights", "model.zip"]


LOCAL = [
    Probe("an ELMoForManyLangs folder without encoder.pkl", _without_encoder,
          "Weights file not found: model/encoder.pkl (an ELMoForManyLangs model folder holds it)"),
    Probe("an archive given as a path", _local_archive,
          "model.zip is a zip archive: unpack it and give the folder that holds its config.json"),
]


@pytest.mark.parametrize("probe", LOCAL, ids=str)
def test_a_half_folder_or_an_archive_given_as_a_model_is_named_for_what_it_is(probe, workspace, capsys, monkeypatch):
    run_probe(probe, workspace, capsys, monkeypatch)


def _find_and_load(cache: Path, start, results) -> None:
    from spacy_elmo.models.loaders import find_model, load_model

    start.wait()
    try:
        folder, _ = find_model("elmoformanylangs-pt", cache=cache, url=closed_port_url())
        load_model(folder)
        results.put("loaded")
    except BaseException as err:  # noqa: B902 (reported to the test)
        results.put(f"{type(err).__name__}: {err}")


def test_processes_unpacking_one_archive_at_once_each_load_the_whole_model(tmp_path, monkeypatch):
    """Each writes slowly (as a large model does), all start together: one unpacks, the
    others wait for it and read its folder, never a half-written file."""
    cache = tmp_path / "cache"
    _archive(cache / "elmoformanylangs" / "pt" / "168.zip")
    copy = shutil.copyfileobj

    def slow_copy(*args) -> None:
        time.sleep(0.05)
        copy(*args)

    monkeypatch.setattr(shutil, "copyfileobj", slow_copy)
    context = multiprocessing.get_context("fork")  # the children inherit the slow copy
    start, results = context.Barrier(3), context.Queue()
    processes = [context.Process(target=_find_and_load, args=(cache, start, results)) for _ in range(3)]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join()
    assert outcomes == ["loaded"] * 3
    unpacked = [f"model/{name}" for name in MODEL_FILES]
    assert sorted(snapshot(cache / "elmoformanylangs" / "pt")) == ["168.zip", "model", *unpacked]
