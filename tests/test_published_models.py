"""Published models beyond AllenNLP's four: contributed bilm-tf models under their own
paths, and ELMoForManyLangs archives, served from 127.0.0.1 as their publishers lay them out."""
import json
import shutil
import zipfile
from pathlib import Path

import numpy
import pytest
import torch

from spacy_elmo.errors import SpacyElmoError
from spacy_elmo.models.loaders import find_model, load_model, load_named_weights
from spacy_elmo.models.pytorch import elmoformanylangs_archive
from spacy_elmo.named_models import ELMOFORMANYLANGS, NAMED_MODELS, default_model

from .test_download import closed_port_url, serving

MANYLANGS = Path(__file__).resolve().parent / "fixtures" / "elmoformanylangs" / "with_words"
MODEL_FILES = ["char.dic", "cnn_6_5_8_16_sample.json", "config.json", "encoder.pkl", "token_embedder.pkl", "word.dic"]
# The fixture biLM stands for the published models.
pytestmark = pytest.mark.usefixtures("fixture_as_published")


def write_archive(path: Path, prefix: str = "pt.model/", extra=()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name in MODEL_FILES:
            archive.write(MANYLANGS / name, prefix + name)
        for name, data in extra:
            archive.writestr(name, data)
    return path


def expected_layers() -> list:
    return json.loads((MANYLANGS / "expected.json").read_text(encoding="utf8"))


@pytest.mark.parametrize("prefix", ["pt.model/", ""], ids=["in a folder", "at the top"])
def test_an_elmoformanylangs_model_by_name_is_downloaded_unpacked_and_computes_its_layers(tmp_path, prefix):
    write_archive(tmp_path / "server" / "11" / "168.zip", prefix)
    cache = tmp_path / "cache"
    with serving(tmp_path / "server") as url:
        folder, options = find_model("elmoformanylangs-pt", cache=cache, url=url)
    assert options is None and folder == cache / "elmoformanylangs" / "pt" / "model"
    assert sorted(p.name for p in folder.iterdir()) == MODEL_FILES
    # Offline afterwards: the unpacked folder is used as it is.
    assert find_model("elmoformanylangs-pt", cache=cache, url=closed_port_url()) == (folder, None)
    bilm = load_named_weights("elmoformanylangs-pt", cache_dir=cache, base_url=closed_port_url())
    reference = expected_layers()
    with torch.no_grad():
        layers = bilm(bilm.ids_of(reference["sentences"][:1])).layers[0]
    numpy.testing.assert_allclose(layers.numpy(), numpy.array(reference["layers"][0]), rtol=0, atol=1e-5)


def test_only_the_model_files_of_an_archive_are_unpacked_under_their_own_names(tmp_path):
    hostile = [("../../escaped.txt", b"x"), ("pt.model/../../../escaped.pkl", b"x"), ("pt.model/run.sh", b"rm -rf /")]
    write_archive(tmp_path / "server" / "11" / "168.zip", extra=hostile)
    with serving(tmp_path / "server") as url:
        folder, _ = find_model("elmoformanylangs-pt", cache=tmp_path / "cache", url=url)
    assert sorted(p.name for p in folder.iterdir()) == MODEL_FILES
    assert not list(tmp_path.rglob("escaped*")) and not list(tmp_path.rglob("run.sh"))
    load_model(folder)


def test_an_archive_without_a_model_is_refused_and_nothing_is_cached(tmp_path):
    server = tmp_path / "server" / "11"
    server.mkdir(parents=True)
    with zipfile.ZipFile(server / "168.zip", "w") as archive:
        archive.writestr("README", "no model here")
    with serving(tmp_path / "server") as url:
        with pytest.raises(SpacyElmoError, match=r"168.zip: no config.json in the archive; not an ELMoForManyLangs model"):
            find_model("elmoformanylangs-pt", cache=tmp_path / "cache", url=url)
    assert not (tmp_path / "cache").exists()


def test_an_archive_that_declares_too_much_is_refused_before_unpacking(tmp_path, monkeypatch):
    write_archive(tmp_path / "server" / "11" / "168.zip")
    monkeypatch.setattr(elmoformanylangs_archive, "MAX_ARCHIVE_BYTES", 1000)
    with serving(tmp_path / "server") as url:
        with pytest.raises(SpacyElmoError, match="declare .* bytes, more than the 1,000 .*refused before unpacking"):
            find_model("elmoformanylangs-pt", cache=tmp_path / "cache", url=url)
    assert not any(path.is_file() for path in (tmp_path / "cache").rglob("*"))


@pytest.mark.parametrize("name", ["pubmed", "portuguese-wikipedia", "portuguese-brwac", "german-tsystems"])
def test_a_contributed_model_is_fetched_from_its_publishers_paths(tmp_path, allennlp_model_dir, fixture_bilm, name):
    model = NAMED_MODELS[name]
    for source, path in zip(("options.json", "lm_weights.hdf5"), model.files):
        (tmp_path / "server" / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(allennlp_model_dir / source, tmp_path / "server" / path)
    with serving(tmp_path / "server") as url:
        bilm = load_named_weights(name, cache_dir=tmp_path / "cache", base_url=url)
    ids = bilm.ids_of([["Olá", "mundo", "."]])
    with torch.no_grad():
        numpy.testing.assert_array_equal(bilm(ids).layers.numpy(), fixture_bilm(ids).layers.numpy())
    assert sorted(p.name for p in (tmp_path / "cache" / model.folder).iterdir()) == sorted(model.file_names())


def test_every_name_has_its_own_cache_folder_and_each_language_of_elmoformanylangs_one_name():
    folders = [model.folder for model in NAMED_MODELS.values()]
    assert len(folders) == len(set(folders))
    assert len(ELMOFORMANYLANGS) == 44
    assert {model.lang for model in NAMED_MODELS.values() if model.name.startswith("elmoformanylangs-")} == {
        lang for lang, _, _ in ELMOFORMANYLANGS
    }


def test_a_language_without_a_shipped_model_is_told_the_published_ones():
    with pytest.raises(SpacyElmoError, match="published ones by name: german-tsystems, elmoformanylangs-de"):
        default_model("de")
