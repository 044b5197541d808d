"""Shared test fixtures: the reference biLMs in ../shared and the real datasets."""
import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("SPACY_ELMO_SHARED", Path(__file__).resolve().parents[2] / "shared"))
REFERENCE = SHARED / "fixtures" / "elmo_reference"
DATA = SHARED / "data"


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """../shared/fixtures/elmo_reference (skips when absent)."""
    return _require(REFERENCE)


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
    from spacy_elmo.original_format import load_bilm

    return load_bilm(allennlp_model_dir / "lm_weights.hdf5").eval()
