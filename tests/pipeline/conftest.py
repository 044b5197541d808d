from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def weights(allennlp_model_dir: Path) -> Path:
    """The fixture biLM: an .hdf5 file with options.json beside it."""
    return allennlp_model_dir / "lm_weights.hdf5"
