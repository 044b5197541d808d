"""Growing a trained biLM's LSTM or projection: the same outputs, new parts that can learn."""
import dataclasses

import pytest
import torch

from spacy_elmo.models.pytorch.bilm import ElmoBiLM
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.models.pytorch.options import NAMED_SIZES
from spacy_elmo.models.pytorch.widen import widen_lstm, widen_projection

SENTENCES = [["The", "cat", "sat", "on", "the", "mat", "."], ["Colorless", "green", "ideas"], ["Hi"]]


@pytest.fixture
def trained_bilm():
    torch.manual_seed(0)
    bilm = ElmoBiLM(NAMED_SIZES["tiny"])
    with torch.no_grad():  # biases away from zero, as a trained biLM's are
        for bias in bilm.lstm.biases:
            bias.normal_(0.0, 0.5)
        bilm.char_encoder.projection.bias.normal_(0.0, 0.5)
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
    # The new cells do run: in every layer and gate block their weights are not zero.
    for layer in range(wide.lstm.n_layers):
        for weights in (wide.lstm.input_weights, wide.lstm.hidden_weights):
            blocks = weights[layer].unflatten(-1, (4, old + 40))[..., old:]
            assert (blocks.abs().sum(dim=(0, 1, 3)) > 0).all()


def _new_gate_gradients(wide, old: int):
    wide.zero_grad()
    wide(batch_to_char_ids(SENTENCES)).layers.square().sum().backward()
    return [
        wide.lstm.input_weights[layer].grad.unflatten(-1, (4, wide.options.lstm_dim))[..., old:].abs().sum()
        for layer in range(wide.lstm.n_layers)
    ]


def test_new_cells_are_silent_until_their_projection_rows_learn(trained_bilm):
    old = trained_bilm.options.lstm_dim
    wide = widen_lstm(trained_bilm, old + 8).train()
    assert all(gradient == 0 for gradient in _new_gate_gradients(wide, old))
    for layer in range(wide.lstm.n_layers):
        # What the first updates do: the new projection rows get a gradient ...
        assert wide.lstm.projections[layer].grad[:, old:].abs().sum() > 0
    with torch.no_grad():
        for projection in wide.lstm.projections:
            projection[:, old:] -= 0.1 * projection.grad[:, old:]
    # ... and once they have moved, the new cells' gate weights learn too.
    assert all(gradient > 0 for gradient in _new_gate_gradients(wide, old))


def test_widened_bilm_keeps_its_settings(trained_bilm):
    trained_bilm.set_dropout(0.25)
    wide = widen_lstm(trained_bilm.train(), trained_bilm.options.lstm_dim + 4)
    assert (wide.lstm.dropout, wide.training) == (0.25, True)
    for name, value in trained_bilm.char_encoder.state_dict().items():
        torch.testing.assert_close(wide.char_encoder.state_dict()[name], value, rtol=0, atol=0)


def test_narrowing_is_refused(trained_bilm):
    with pytest.raises(ValueError, match="widened, not narrowed"):
        widen_lstm(trained_bilm, trained_bilm.options.lstm_dim - 1)


def _old_and_new_dimensions(layers, old: int):
    """The layers of a biLM whose projection grew from `old`: each direction's first `old`
    dimensions (*Shape:* ``(..., 2 * old)``) and the rest."""
    halves = layers.unflatten(-1, (2, layers.shape[-1] // 2))
    return halves[..., :old].flatten(-2), halves[..., old:]


def test_widened_projection_gives_the_same_layers_with_zeros_appended(trained_bilm):
    old = trained_bilm.options.projection_dim
    wide = widen_projection(trained_bilm, old + 12)
    assert wide.options == dataclasses.replace(trained_bilm.options, projection_dim=old + 12)
    char_ids = batch_to_char_ids(SENTENCES)
    with torch.no_grad():
        expected, got = trained_bilm(char_ids).layers, wide(char_ids).layers
    # Each direction's half: the old dimensions, then the new ones, zero.
    kept, added = _old_and_new_dimensions(got, old)
    torch.testing.assert_close(kept, expected, rtol=0, atol=1e-6)
    assert added.abs().max() == 0
    # The LSTM weights that read the new dimensions are not zero, so the new dimensions can learn.
    for layer in range(wide.lstm.n_layers):
        for weights in (wide.lstm.input_weights, wide.lstm.hidden_weights):
            assert (weights[layer][:, old:].abs().sum(dim=(0, 2)) > 0).all()


def _new_input_row_gradients(wide, old: int):
    wide.zero_grad()
    wide(batch_to_char_ids(SENTENCES)).layers.sum().backward()
    return [wide.lstm.input_weights[layer].grad[:, old:].abs().sum() for layer in range(wide.lstm.n_layers)]


def test_new_projection_dimensions_are_silent_until_their_output_weights_learn(trained_bilm):
    old = trained_bilm.options.projection_dim
    wide = widen_projection(trained_bilm, old + 4).train()
    # The LSTM rows that read the new dimensions see zeros: no gradient yet ...
    assert all(gradient == 0 for gradient in _new_input_row_gradients(wide, old))
    # ... but the zero output weights that write the new dimensions get one ...
    assert wide.char_encoder.projection.weight.grad[old:].abs().sum() > 0
    for projection in wide.lstm.projections:
        assert projection.grad[..., old:].abs().sum() > 0
    with torch.no_grad():
        wide.char_encoder.projection.weight[old:] -= 0.1 * wide.char_encoder.projection.weight.grad[old:]
        for projection in wide.lstm.projections:
            projection[..., old:] -= 0.1 * projection.grad[..., old:]
    # ... and once they have moved, the rows that read them learn too.
    assert all(gradient > 0 for gradient in _new_input_row_gradients(wide, old))


def test_a_biLM_without_a_token_projection_gets_one_that_passes_the_CNN_through():
    torch.manual_seed(0)
    options = dataclasses.replace(NAMED_SIZES["tiny"], projection_dim=NAMED_SIZES["tiny"].n_filters)
    plain = ElmoBiLM(options).eval()
    assert plain.char_encoder.projection is None
    wide = widen_projection(plain, options.projection_dim + 8)
    char_ids = batch_to_char_ids(SENTENCES)
    with torch.no_grad():
        expected, got = plain(char_ids).layers, wide(char_ids).layers
    kept, added = _old_and_new_dimensions(got, options.projection_dim)
    torch.testing.assert_close(kept, expected, rtol=0, atol=1e-6)
    assert added.abs().max() == 0
    # At its own width it stays without one, a copy.
    same = widen_projection(plain, options.projection_dim)
    assert same.char_encoder.projection is None
    with torch.no_grad():
        torch.testing.assert_close(same(char_ids).layers, expected, rtol=0, atol=0)


def test_widening_the_projection_to_the_width_of_the_CNN_is_refused(trained_bilm):
    with pytest.raises(ValueError, match="the width of the character CNN"):
        widen_projection(trained_bilm, trained_bilm.options.n_filters)


def test_widened_lstm_and_projection_together_give_the_same_layers(trained_bilm):
    old = trained_bilm.options
    wide = widen_projection(widen_lstm(trained_bilm, old.lstm_dim + 8), old.projection_dim + 8)
    char_ids = batch_to_char_ids(SENTENCES)
    with torch.no_grad():
        expected, got = trained_bilm(char_ids).layers, wide(char_ids).layers
    torch.testing.assert_close(_old_and_new_dimensions(got, old.projection_dim)[0], expected, rtol=0, atol=1e-6)


def test_narrowing_the_projection_is_refused(trained_bilm):
    with pytest.raises(ValueError, match="widened, not narrowed"):
        widen_projection(trained_bilm, trained_bilm.options.projection_dim - 1)
