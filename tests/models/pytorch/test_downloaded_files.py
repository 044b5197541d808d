"""The check a downloaded model file passes before it enters the cache: its kind from the
URL's file name, then options read as the loader reads them, HDF5 weights by their signature
(the loader reads them: tests/test_download.py), and archives checked as ELMoForManyLangs models."""
import shutil
import zipfile
from pathlib import Path

import pytest

from spacy_elmo.errors import InputError, OptionsError, SpacyElmoError
from spacy_elmo.models.pytorch.downloaded_files import verify_download

MANYLANGS = Path(__file__).resolve().parents[2] / "fixtures" / "elmoformanylangs" / "with_words"


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


@pytest.mark.parametrize("write,shown,message", [
    (lambda path: path.write_bytes(b""), "http://h/w.hdf5", r"^http://h/w.hdf5 sent an empty file$"),
    (lambda path: path.write_text("<html>"), "http://h/w.hdf5", r"^http://h/w.hdf5 is not an HDF5 file$"),
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
