"""Shared test fixtures: the committed reference biLMs (tests/fixtures) and the datasets in ../shared."""
import os
from pathlib import Path

import pytest
import torch

SHARED = Path(os.environ.get("SPACY_ELMO_SHARED", Path(__file__).resolve().parents[2] / "shared"))
#: Committed with the tests (Apache-2.0, see its README): a missing file is a broken checkout.
REFERENCE = Path(__file__).resolve().parent / "fixtures" / "elmo_reference"
DATA = SHARED / "data"


def _require(path: Path) -> Path:
    """Datasets are optional (a user's clone has no ../shared): skip without them."""
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path


@pytest.fixture()
def one_torch_thread():
    """Tiny models run fastest (and reproducibly) on one thread, also on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run_cli(capsys, monkeypatch, *args):
    """Run `spacy-elmo ARGS` in-process through `main`; (exit code, stdout, stderr)."""
    import sys

    from spacy_elmo.cli import main

    monkeypatch.setattr(sys, "argv", ["spacy-elmo", *map(str, args)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    return exit_info.value.code or 0, captured.out, captured.err


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """tests/fixtures/elmo_reference: fails, not skips, when absent."""
    if not (REFERENCE / "allennlp" / "lm_weights.hdf5").exists():
        pytest.fail(f"{REFERENCE} is missing: the reference fixtures are part of the repository")
    return REFERENCE


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """../shared/data (skips when absent)."""
    return _require(DATA)


@pytest.fixture(scope="session")
def allennlp_model_dir(reference_dir: Path) -> Path:
    """The skip-connection fixture biLM: options.json + lm_weights.hdf5."""
    return reference_dir / "allennlp"


@pytest.fixture()
def fixture_bilm(allennlp_model_dir: Path):
    """A fresh copy of the tiny reference biLM, in eval mode."""
    from spacy_elmo.models.pytorch.original_format import load_bilm

    return load_bilm(allennlp_model_dir / "lm_weights.hdf5").eval()


@pytest.fixture()
def dead_pid() -> int:
    """The id of a process that has exited (as a killed run's temporary files carry)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


@pytest.fixture()
def fixture_as_published(monkeypatch):
    """The fixture biLM served or cached as a published model (`small`, `pubmed`, ...): those
    names expect no size (theirs is not the fixture's)."""
    from dataclasses import replace

    from spacy_elmo.named_models import NAMED_MODELS

    for name, model in NAMED_MODELS.items():
        if model.size is not None:
            monkeypatch.setitem(NAMED_MODELS, name, replace(model, size=None))


@pytest.fixture()
def model_packages_absent(monkeypatch):
    """As where spacy-elmo alone is installed: the packages of models/ neither installed nor
    in a checkout (spacy-elmo's own files, english-compact's biLM, stay)."""
    from spacy_elmo.model_packages import ModelPart

    installed_folders = ModelPart.installed_folders
    monkeypatch.setattr(
        ModelPart, "installed_folders", lambda part: installed_folders(part) if part.project is None else iter(())
    )
