"""`load_bilm`: a biLM by name or path, in either format, found as every command finds it."""
from pathlib import Path

import pytest
import torch

from spacy_elmo import load_bilm
from spacy_elmo.errors import InputError
from spacy_elmo.models.loaders import load_named_weights

ELMOFORMANYLANGS = Path(__file__).resolve().parents[1] / "fixtures" / "elmoformanylangs" / "with_words"


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_a_name_loads_as_the_component_loads_it(monkeypatch):
    monkeypatch.setenv("SPACY_ELMO_BASE_URL", "http://127.0.0.1:9")  # a shipped model downloads nothing
    bilm = load_bilm("english-compact")
    assert (bilm.options.n_layers, bilm.options.lstm_dim, bilm.options.projection_dim) == (2, 512, 128)
    assert _same(bilm, load_named_weights("english-compact"))


def test_a_path_in_either_format_and_an_unknown_name(allennlp_model_dir):
    assert load_bilm(allennlp_model_dir / "lm_weights.hdf5").options.projection_dim == 16
    assert load_bilm(str(ELMOFORMANYLANGS)).options.word_embedding_dim > 0
    with pytest.raises(InputError, match="not an ELMo model name: english-compact, portuguese-compact"):
        load_bilm("english-compactt")
