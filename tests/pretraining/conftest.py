"""Fixtures for the pretraining tests: tiny corpora, one torch thread."""
from pathlib import Path

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models run fastest (and reproducibly) on one thread, also on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_text(reference_dir: Path) -> Path:
    """bilm-tf's training smoke-test corpus: 4 lower-cased, tokenized lines (134 words)."""
    return reference_dir / "bilm-tf" / "train" / "data.txt"
