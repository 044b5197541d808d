"""The check a downloaded model file passes before it enters the cache: its kind from the
URL's file name, then options read as the loader reads them, HDF5 weights read a slab at a
time, and archives checked as ELMoForManyLangs models."""
import shutil
import zipfile
from pathlib import Path

import h5py
import numpy
import pytest

from spacy_elmo.errors import InputError, OptionsError, SpacyElmoError
from spacy_elmo.models.pytorch import downloaded_files
from spacy_elmo.models.pytorch.downloaded_files import _slabs, verify_download

MANYLANGS = Path(__file__).resolve().parents[2] / "fixtures" / "elmoformanylangs" / "with_words"


def _selected_values(dataset, selection) -> int:
    """How many values `dataset[selection]` reads (a run of rows, or all)."""
    if isinstance(selection, slice):
        return len(range(*selection.indices(dataset.shape[0]))) * (dataset.size // dataset.shape[0])
    return dataset.size or 0


def guard_reads(monkeypatch, allowed) -> list:
    """Fail the test, before reading, when `dataset[selection]` would read more than
    `allowed(dataset)` values; the sizes read, for the test to check."""
    read, seen = h5py.Dataset.__getitem__, []

    def guarded(dataset, selection):
        values = _selected_values(dataset, selection)
        assert values <= allowed(dataset), f"{dataset.name}: {values:,} values read at once"
        seen.append(values)
        return read(dataset, selection)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", guarded)
    return seen


def _dataset_names(handle) -> list:
    names: list = []
    handle.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
    return names


def test_a_downloaded_file_is_checked_a_slab_at_a_time(allennlp_model_dir: Path, monkeypatch):
    monkeypatch.setattr(downloaded_files, "SLAB_VALUES", 256)
    # At most 256 values at once, or one row where a row holds more.
    seen = guard_reads(monkeypatch, lambda dataset: max(256, dataset.size // dataset.shape[0]))
    verify_download(allennlp_model_dir / "lm_weights.hdf5", "http://127.0.0.1/elmo_weights.hdf5")
    with h5py.File(allennlp_model_dir / "lm_weights.hdf5") as handle:
        assert sum(seen) == sum(handle[name].size for name in _dataset_names(handle))


@pytest.mark.parametrize("shape,slab_values,expected", [
    ((10, 3), 6, [slice(0, 2), slice(2, 4), slice(4, 6), slice(6, 8), slice(8, 10)]),
    ((3, 10), 6, [slice(0, 1), slice(1, 2), slice(2, 3)]),  # a row larger than a slab: one row at a time
    ((), 6, [()]),  # a scalar: all of it
    ((0, 4), 6, []),
])
def test_the_slabs_are_runs_of_rows_that_cover_the_dataset(monkeypatch, shape, slab_values, expected):
    monkeypatch.setattr(downloaded_files, "SLAB_VALUES", slab_values)
    assert list(_slabs(numpy.zeros(shape))) == expected


@pytest.mark.parametrize("file,shown", [
    ("options.json", "http://h/elmo_options.json?sig=a.hdf5"),
    ("lm_weights.hdf5", "http://h/elmo_weights.hdf5?sig=a.json"),
    ("lm_weights.hdf5", "http://h/weights.h5"),
])
def test_a_model_file_of_its_kind_passes_whatever_the_query_after_its_name(allennlp_model_dir: Path, file, shown):
    assert verify_download(allennlp_model_dir / file, shown) is None


def test_an_elmoformanylangs_archive_passes_and_a_zip_without_a_model_is_refused(tmp_path):
    with zipfile.ZipFile(tmp_path / "168.zip", "w") as archive:
        for path in MANYLANGS.iterdir():
            archive.write(path, "pt.model/" + path.name)
    verify_download(tmp_path / "168.zip", "http://h/11/168.zip")
    with zipfile.ZipFile(tmp_path / "169.zip", "w") as archive:
        archive.writestr("README", "no model here")
    with pytest.raises(SpacyElmoError, match=r"^http://h/11/169.zip: no config.json in the archive"):
        verify_download(tmp_path / "169.zip", "http://h/11/169.zip")


def _external(path: Path) -> None:
    (path.parent / "elsewhere.bin").write_bytes(bytes(16))
    with h5py.File(path, "w") as handle:
        handle.create_dataset("char_embed", (4,), "f4", external=[(str(path.parent / "elsewhere.bin"), 0, 16)])


def _without_datasets(path: Path) -> None:
    with h5py.File(path, "w") as handle:
        handle.create_group("RNN_0")


@pytest.mark.parametrize("write,shown,message", [
    (lambda path: path.write_bytes(b""), "http://h/w.hdf5", r"^http://h/w.hdf5 sent an empty file$"),
    (lambda path: path.write_text("<html>"), "http://h/w.hdf5", r"^http://h/w.hdf5 is not an HDF5 file$"),
    (_without_datasets, "http://h/w.hdf5", r"is an HDF5 file without datasets, not biLM weights"),
    (_external, "http://h/w.hdf5", r"^http://h/w.hdf5: dataset 'char_embed' keeps its data in other files; refused"),
    (lambda path: path.write_text("a\n"), "http://h/vocab.txt?x=.json",
     r"vocab.txt\?x=.json: not a kind of model file spacy-elmo checks \(.json, .hdf5, .zip\); refused"),
])
def test_a_file_that_is_not_a_model_file_is_refused_in_one_line(tmp_path, write, shown, message):
    write(tmp_path / "downloaded")
    with pytest.raises(InputError, match=message):
        verify_download(tmp_path / "downloaded", shown)


def test_weights_under_an_options_name_are_refused_as_options_naming_the_url(tmp_path, allennlp_model_dir: Path):
    shutil.copy(allennlp_model_dir / "lm_weights.hdf5", tmp_path / "downloaded")
    with pytest.raises(OptionsError, match=r"^http://h/options.json: not UTF-8 text \(byte 0\)$"):
        verify_download(tmp_path / "downloaded", "http://h/options.json")
