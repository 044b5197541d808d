"""spacy-elmo's own models by name, split into packages: found installed, in the checkout or in
the cache (checked by SHA-256), or one error naming every file missing and what installs it."""
import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from spacy_elmo.errors import InputError
from spacy_elmo.model_packages import CHECKOUT_MODELS
from spacy_elmo.models.loaders import find_model
from spacy_elmo.named_models import NAMED_MODELS, language_model_folder

from .test_download import closed_port_url

ROOT = Path(__file__).resolve().parents[1]
PORTUGUESE = CHECKOUT_MODELS / "portuguese-compact" / "spacy_elmo_portuguese_compact"
ENGLISH = ROOT / "spacy_elmo" / "resources" / "english_compact"


def test_the_checkout_holds_each_part_with_the_checksums_the_names_record():
    for model in (NAMED_MODELS["english-compact"], NAMED_MODELS["portuguese-compact"]):
        for part in (model.bilm, model.language_model):
            folder = next(folder for folder in part.installed_folders() if folder.is_relative_to(ROOT))
            for name, checksum in part.checksums:
                assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == checksum, folder / name


def test_an_installed_package_is_found_before_the_checkout(tmp_path, monkeypatch):
    site = tmp_path / "site" / "spacy_elmo_portuguese_compact"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    for name in ("options.json", "weights.hdf5"):
        (site / name).symlink_to(PORTUGUESE / name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert find_model("portuguese-compact") == (site / "weights.hdf5", site / "options.json")


def test_a_model_in_its_packages_by_name_everywhere():
    """The biLM where the component and embed read it, its softmax where pretrain and perplexity do."""
    assert find_model("portuguese-compact")[0] == PORTUGUESE / "weights.hdf5"
    assert language_model_folder("portuguese-compact") == CHECKOUT_MODELS / "portuguese-compact-lm" / (
        "spacy_elmo_portuguese_compact_lm"
    )
    assert language_model_folder("english-compact") == CHECKOUT_MODELS / "english-compact-lm" / (
        "spacy_elmo_english_compact_lm"
    )
    assert language_model_folder("small") is None and language_model_folder(str(ENGLISH)) is None


def test_what_is_not_installed_is_named_at_once_with_what_installs_it(tmp_path, model_packages_absent):
    cache = tmp_path / "cache"
    with pytest.raises(InputError) as err:
        find_model("portuguese-compact", cache=cache)
    assert str(err.value) == (
        "portuguese-compact: options.json, weights.hdf5 are not installed; `pip install ./models/portuguese-compact` "
        f"in a clone of spacy-elmo installs them, or place them in {cache / 'portuguese_compact'}"
    )
    with pytest.raises(InputError) as err:
        language_model_folder("portuguese-compact", cache=cache)
    assert str(err.value).startswith(
        "portuguese-compact: options.json, weights.hdf5, softmax.hdf5, vocab.txt are not installed; "
        "`pip install ./models/portuguese-compact ./models/portuguese-compact-lm` in a clone of spacy-elmo installs them"
    )
    assert find_model("english-compact")[0] == ENGLISH / "weights.hdf5"  # in spacy-elmo itself
    with pytest.raises(InputError, match=r"^english-compact: softmax.hdf5, vocab.txt are not installed; `pip install "
                       r"./models/english-compact-lm` in a clone of spacy-elmo installs them, or place them in "):
        language_model_folder("english-compact", cache=cache)


def test_files_put_in_the_cache_by_hand_are_checked_by_checksum(tmp_path, model_packages_absent):
    folder = tmp_path / "cache" / "portuguese_compact"
    folder.mkdir(parents=True)
    shutil.copy(PORTUGUESE / "options.json", folder)
    shutil.copy(PORTUGUESE / "weights.hdf5", folder)
    assert find_model("portuguese-compact", cache=tmp_path / "cache") == (folder / "weights.hdf5", folder / "options.json")
    shutil.copy(ENGLISH / "weights.hdf5", folder)  # the same sizes: it would load
    with pytest.raises(InputError, match=r"weights.hdf5 is not portuguese-compact's weights.hdf5 \(its SHA-256 differs\); "
                       r"put portuguese-compact's own there, or delete it and install it: pip install "
                       r"./models/portuguese-compact"):
        find_model("portuguese-compact", cache=tmp_path / "cache")


def test_another_models_files_are_not_accepted_as_a_published_one(tmp_path):
    small = NAMED_MODELS["small"]
    folder = tmp_path / "cache" / small.folder
    folder.mkdir(parents=True)
    for source, name in zip(("options.json", "weights.hdf5"), small.file_names()):
        shutil.copy(ENGLISH / source, folder / name)
    with pytest.raises(InputError, match=r"_options.json: the options of a biLM of LSTM 2x512, projection 128, .*, not "
                       r"small's \(LSTM 2x1024, projection 128, .*\): another model's files are in .*; delete them to "
                       "download small again, or put its own files there"):
        find_model("small", cache=tmp_path / "cache", url=closed_port_url())


@pytest.mark.slow
def test_the_wheel_holds_what_english_prediction_reads_and_each_model_package_its_part(tmp_path):
    """spacy-elmo's wheel: english-compact's biLM and vectors, no softmax, no other language (under
    40 MB); each package of models/ its own files. Built offline from copies (the checkout stays clean)."""
    pytest.importorskip("setuptools")
    source = tmp_path / "spacy-elmo"
    source.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source)
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "spacy_elmo", source / "spacy_elmo", ignore=ignore)
    projects = [source, *(shutil.copytree(path, tmp_path / path.name, ignore=ignore) for path in CHECKOUT_MODELS.iterdir())]
    for project in projects:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(tmp_path / "wheels"), str(project)], check=True, capture_output=True)
    wheels = {path.name.split("-")[0]: path for path in (tmp_path / "wheels").glob("*.whl")}
    assert wheels["spacy_elmo"].stat().st_size < 40_000_000
    with zipfile.ZipFile(wheels.pop("spacy_elmo")) as wheel:
        resources = {name for name in wheel.namelist() if "/resources/" in name and not name.endswith("/")}
    english = "spacy_elmo/resources/english_compact/"
    assert {english + "options.json", english + "weights.hdf5", english + "vectors/vocab/vectors"} <= resources
    assert not [name for name in resources if not name.startswith(english) or name.endswith(("softmax.hdf5", "vocab.txt"))]
    for model in (NAMED_MODELS["english-compact"], NAMED_MODELS["portuguese-compact"]):
        for part in (model.bilm, model.language_model):
            if part.project is not None:
                with zipfile.ZipFile(wheels.pop(part.module)) as wheel:
                    assert {f"{part.module}/{name}" for name in part.file_names()} <= set(wheel.namelist())
    assert not wheels
