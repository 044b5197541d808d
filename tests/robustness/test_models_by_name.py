"""Models by name where they cannot be had: offline, not installed, or other files in their
place. One line that names every file missing and how to get it, exit code 1, nothing left."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from confection import ConfigValidationError
from spacy.tokens import DocBin
from spacy.training.converters import conllu_to_docs

from spacy_elmo.errors import InputError
from spacy_elmo.named_models import NAMED_MODELS

from ..test_download import closed_port_url
from .conftest import Probe, run_probe, snapshot

ROOT = Path(__file__).resolve().parents[2]
ENGLISH = ROOT / "spacy_elmo" / "resources" / "english_compact"
PORTUGUESE = ROOT / "models" / "portuguese-compact" / "spacy_elmo_portuguese_compact"
SMALL = NAMED_MODELS["small"]


def _embed(name: str):
    return lambda ws: ["embed", "text.txt", "out.hdf5", "--weights", name]


def _in_the_cache(name: str, sources):
    """`name`'s cache folder holding `sources` (other files) under its own file names."""
    def prepare(ws: Path) -> list:
        folder = ws / "cache" / NAMED_MODELS[name].folder
        folder.mkdir(parents=True)
        for source, file_name in zip(sources, NAMED_MODELS[name].file_names()):
            shutil.copy(source, folder / file_name)
        return _embed(name)(ws)

    return prepare


OFFLINE = [
    Probe("small, offline", _embed("small"),
          f"fetch PORT/{SMALL.files[0]} and PORT/{SMALL.files[1]} on another machine and put them in "),
    Probe("elmoformanylangs-pt, offline", _embed("elmoformanylangs-pt"),
          "fetch PORT/11/168.zip on another machine and put it in "),
    Probe("english-compact's files in the cache as small", _in_the_cache("small", [ENGLISH / "options.json", ENGLISH / "weights.hdf5"]),
          "_options.json: the options of a biLM of LSTM 2x512, projection 128, filters"),
]


@pytest.mark.parametrize("probe", OFFLINE, ids=str)
def test_a_published_model_offline_names_every_file_to_fetch(probe, workspace, capsys, monkeypatch):
    url = closed_port_url()
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(workspace / "cache"))
    monkeypatch.setenv("SPACY_ELMO_BASE_URL", url)
    probe.message = probe.message.replace("PORT", url)
    run_probe(probe, workspace, capsys, monkeypatch)


def _init_from_english_compact(ws: Path) -> list:
    return ["pretrain", "pretrain.cfg", "out", "--init-from", "english-compact", "--paths.train", "corpus.txt"]


NOT_INSTALLED = [
    Probe("portuguese-compact, not installed", _embed("portuguese-compact"),
          "portuguese-compact: options.json, weights.hdf5 are not installed; `pip install ./models/portuguese-compact` "
          "in a clone of spacy-elmo installs them, or place them in "),
    Probe("--init-from english-compact without its softmax package", _init_from_english_compact,
          "english-compact: softmax.hdf5, vocab.txt are not installed; `pip install ./models/english-compact-lm` in a "
          "clone of spacy-elmo installs them"),
    Probe("english-compact's weights in the cache as portuguese-compact's",
          _in_the_cache("portuguese-compact", [PORTUGUESE / "options.json", ENGLISH / "weights.hdf5"]),
          "weights.hdf5 is not portuguese-compact's weights.hdf5 (its SHA-256 differs)"),
]


@pytest.mark.parametrize("probe", NOT_INSTALLED, ids=str)
def test_a_model_package_not_installed_is_named_with_what_installs_it(
    probe, workspace, capsys, monkeypatch, model_packages_absent
):
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(workspace / "cache"))
    run_probe(probe, workspace, capsys, monkeypatch)


def test_initialize_offline_raises_its_own_error_which_spacy_commands_print_as_one_line(monkeypatch):
    monkeypatch.setenv("SPACY_ELMO_BASE_URL", closed_port_url())
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = {
        "weights_loader": {"@misc": "spacy-elmo.elmo_weights.v1", "model": "portuguese-wikipedia"}
    }
    with pytest.raises(InputError) as err:
        nlp.initialize()
    assert isinstance(err.value, ConfigValidationError)
    assert str(err.value).startswith("Could not download ELMo model 'portuguese-wikipedia' from ")


@pytest.mark.slow
def test_spacy_train_offline_ends_in_one_line(workspace):
    """`spacy train --paths.elmo_model small` without a network: spaCy's ✘ title, the message on one line."""
    conllu = (ROOT / "assets" / "ud_english_ewt" / "en_ewt-ud-dev.sample.conllu").read_text(encoding="utf8")
    docs = list(conllu_to_docs("\n\n".join(conllu.split("\n\n")[:20]), n_sents=10, no_print=True))
    DocBin(docs=docs).to_disk(workspace / "train.spacy")
    before = snapshot(workspace)
    url = closed_port_url()
    env = {**os.environ, "SPACY_ELMO_CACHE": str(workspace / "cache"), "SPACY_ELMO_BASE_URL": url}
    done = subprocess.run(
        [sys.executable, "-m", "spacy", "train", str(ROOT / "configs" / "ud_elmo.cfg"), "--paths.train", "train.spacy",
         "--paths.dev", "train.spacy", "--paths.elmo_model", "small"],
        cwd=workspace, env=env, capture_output=True, text=True, timeout=300,
    )
    output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)  # wasabi's colors
    lines = [line for line in output[output.index("Initializing pipeline"):].splitlines()[1:] if line.strip()]
    assert done.returncode == 1 and "Traceback" not in output, output
    assert len(lines) == 2 and lines[0] == "✘ The elmo component could not initialize its biLM", output
    assert lines[1].startswith(f"Could not download ELMo model 'small' from {url}/") and f"put them in {workspace}" in lines[1]
    assert snapshot(workspace) == before
