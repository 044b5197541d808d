"""Growing a trained biLM's LSTM: the same outputs, new cells that can learn."""
import dataclasses

import pytest
import torch

from spacy_elmo.models.pytorch.bilm import ElmoBiLM
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.models.pytorch.options import NAMED_SIZES
from spacy_elmo.models.pytorch.widen import widen_lstm

SENTENCES = [["The", "cat", "sat", "on", "the", "mat", "."], ["Colorless", "green", "ideas"], ["Hi"]]


@pytest.fixture
def trained_bilm():
    torch.manual_seed(0)
    bilm = ElmoBiLM(NAMED_SIZES["fixture"])
    with torch.no_grad():  # biases away from zero, as a trained biLM's are
        for bias in bilm.lstm.biases:
            bias.normal_(0.0, 0.5)
    return bilm.eval()


def test_widened_bilm_gives_the_same_layers(trained_bilm):
    old = trained_bilm.options.lstm_dim
    wide = widen_lstm(trained_bilm, old + 40)
    assert wide.options == dataclasses.replace(trained_bilm.options, lstm_dim=old + 40)
    assert wide.lstm.input_weights[0].shape[-1] == 4 * (old + 40)
    char_ids = batch_to_char_ids(SENTENCES)
    with torch.no_grad():
        expected, got = trained_bilm(char_ids).layers, wide(char_ids).layers
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    # The new cells do run: their gate weights are not zero.
    assert wide.lstm.hidden_weights[1][:, :, old : old + 40].abs().sum() > 0


def test_new_cells_are_silent_until_their_projection_rows_learn(trained_bilm):
    old = trained_bilm.options.lstm_dim
    wide = widen_lstm(trained_bilm, old + 8).train()
    wide(batch_to_char_ids(SENTENCES)).layers.square().sum().backward()
    for layer in range(wide.lstm.n_layers):
        assert wide.lstm.projections[layer].grad[:, old:].abs().sum() > 0
        gates = wide.lstm.input_weights[layer].grad.unflatten(-1, (4, old + 8))
        assert gates[..., old:].abs().sum() == 0
        assert gates[..., :old].abs().sum() > 0


def test_narrowing_is_refused(trained_bilm):
    with pytest.raises(ValueError, match="widened, not narrowed"):
        widen_lstm(trained_bilm, trained_bilm.options.lstm_dim - 1)
