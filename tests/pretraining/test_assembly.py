"""Assembling the language model: new weights, a pretrained biLM and softmax, a checkpoint's state."""

import pytest
import torch

from spacy_elmo.models.pytorch.options import NAMED_SIZES
from spacy_elmo.models.pytorch.original_format import save_bilm
from spacy_elmo.pretraining.config import SoftmaxConfig
from spacy_elmo.errors import ConfigError, WeightsError
from spacy_elmo.pretraining.assembly import assemble_model, check_same_sizes, negative_samples
from spacy_elmo.pretraining.softmax import save_softmax

FIXTURE = NAMED_SIZES["tiny"]


def test_a_new_model_has_the_sizes_of_its_options_and_the_dropout():
    model = assemble_model(50, dropout=0.2, options=FIXTURE)
    assert model.bilm.options == FIXTURE and model.output_dropout == 0.2
    assert model.softmax.weight.shape == (50, FIXTURE.projection_dim)


def test_a_pretrained_biLM_and_its_softmax_are_read_back(tmp_path):
    torch.manual_seed(0)
    model = assemble_model(50, options=FIXTURE)
    save_bilm(model.bilm, tmp_path)
    save_softmax(model.softmax, tmp_path / "softmax.hdf5")
    again = assemble_model(50, pretrained=(tmp_path, None), softmax=tmp_path / "softmax.hdf5")
    for name, value in model.state_dict().items():
        torch.testing.assert_close(again.state_dict()[name], value, rtol=0, atol=0)
    assert assemble_model(50, pretrained=(tmp_path, None)).softmax.weight.shape == (50, FIXTURE.projection_dim)


def test_a_saved_state_is_loaded_and_one_that_does_not_fit_is_refused():
    state = assemble_model(50, options=FIXTURE).state_dict()
    model = assemble_model(50, options=FIXTURE, state=state)
    torch.testing.assert_close(model.softmax.weight, state["softmax.weight"], rtol=0, atol=0)
    with pytest.raises(WeightsError, match=r"The checkpoint's weights: 'softmax.weight' has shape \(50, 16\), but its settings say \(60, 16\)"):
        assemble_model(60, options=FIXTURE, state=state)


def test_the_biLM_comes_from_options_or_a_pretrained_model_not_both(tmp_path):
    with pytest.raises(ValueError):
        assemble_model(50)
    with pytest.raises(ValueError):
        assemble_model(50, options=FIXTURE, pretrained=(tmp_path, None))


@pytest.mark.parametrize(
    "kind,vocab_size,expected",
    [("auto", 100, None), ("auto", 200, 20), ("full", 200, None), ("sampled", 100, 20)],
)
def test_negative_samples_follow_the_softmax_kind_and_the_vocabulary_size(kind, vocab_size, expected):
    assert negative_samples(SoftmaxConfig(kind=kind, max_full_vocab=150, n_negative_samples=20), vocab_size) == expected


def test_more_negatives_than_words_is_a_config_error():
    with pytest.raises(ConfigError, match=r"softmax.n_negative_samples \(20\) must be smaller than the vocabulary \(20 words\)"):
        negative_samples(SoftmaxConfig(kind="sampled", max_full_vocab=150, n_negative_samples=20), 20)


def test_init_from_sizes_other_than_the_biLMs_own_are_refused(tmp_path):
    save_bilm(assemble_model(50, options=FIXTURE).bilm, tmp_path)
    check_same_sizes((tmp_path, None), lstm_dim=FIXTURE.lstm_dim, projection_dim=None)
    for name, value in (("lstm_dim", FIXTURE.lstm_dim + 8), ("projection_dim", FIXTURE.projection_dim - 1)):
        with pytest.raises(ConfigError, match=f"model.{name} is {value}, .*: --init-from continues a biLM at its own sizes"):
            check_same_sizes((tmp_path, None), **{name: value})
