"""The candidate next English biLM (candidates/english_compact_next) is a drop-in for
`english-compact`: same sizes, vocabulary and softmax shapes, new weights."""
from pathlib import Path

import h5py
import numpy
import torch

from spacy_elmo.models.loaders import load_named_weights
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.models.pytorch.original_format import load_bilm
from spacy_elmo.named_models import model_files

CANDIDATE = Path(__file__).resolve().parents[1] / "candidates" / "english_compact_next"


def test_the_candidate_loads_with_the_shipped_sizes_and_new_weights():
    shipped = load_named_weights("english-compact")
    candidate = load_bilm(CANDIDATE / "weights.hdf5", CANDIDATE / "options.json")
    assert candidate.options == shipped.options
    ids = batch_to_char_ids([["The", "bank", "of", "the", "river", "."]])
    with torch.inference_mode():
        new, old = candidate(ids).layers, shipped(ids).layers
    assert new.shape == old.shape and torch.isfinite(new).all()
    assert not torch.allclose(new[:, 1:], old[:, 1:], atol=1e-3)  # trained further: other LSTM states


def test_the_candidate_continues_the_shipped_vocabulary_and_softmax():
    shipped_dir = model_files("english-compact")[1].parent
    assert (CANDIDATE / "vocab.txt").read_bytes() == (shipped_dir / "vocab.txt").read_bytes()
    with h5py.File(CANDIDATE / "softmax.hdf5", "r") as new, h5py.File(shipped_dir / "softmax.hdf5", "r") as old:
        for name in ("softmax/W", "softmax/b"):
            assert new[name].shape == old[name].shape and new[name].dtype == old[name].dtype
            assert numpy.isfinite(new[name][()]).all()
