"""Fixtures for the pretraining tests: tiny corpora, one torch thread."""
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every pretraining test runs on one torch thread (see tests/conftest.py)."""


@pytest.fixture(scope="session")
def tiny_text(reference_dir: Path) -> Path:
    """bilm-tf's training smoke-test corpus: 4 lower-cased, tokenized lines (134 words)."""
    return reference_dir / "bilm-tf" / "train" / "data.txt"
