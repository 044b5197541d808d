"""The LSTM engine's one interface: the rule that picks a path, and every CPU path computing the reference's layers."""
import pytest
import torch

from spacy_elmo.models.pytorch.lstm import BiLstmStack, PackingPlan
from spacy_elmo.models.pytorch.options import NAMED_SIZES

OPTIONS = NAMED_SIZES["tiny"]


def _stack_and_batch():
    torch.manual_seed(0)
    stack = BiLstmStack(OPTIONS)
    with torch.no_grad():
        for parameter in stack.parameters():
            parameter.normal_(0, 0.3)
    plan = PackingPlan.from_sorted_lengths([5, 3, 3, 1])
    inputs = torch.randn(2, plan.n_rows, OPTIONS.projection_dim)
    return stack, plan, inputs


def test_the_rule_runs_the_recurrence_in_training_the_reference_under_autocast_and_prediction_without_gradients():
    stack, _, inputs = _stack_and_batch()
    assert stack.choose_path(inputs) == "recurrence"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert stack.choose_path(inputs) == "reference"
    with torch.no_grad():
        assert stack.choose_path(inputs) == "prediction"
    with torch.inference_mode():
        assert stack.choose_path(inputs) == "prediction"


@pytest.mark.parametrize("path", ["recurrence", "prediction"])
def test_every_cpu_path_gives_the_reference_layers_and_final_states(path):
    stack, plan, inputs = _stack_and_batch()
    with torch.no_grad():
        expected, expected_states = stack(inputs, plan, path="reference")
        outputs, states = stack(inputs, plan, path=path)
    assert len(outputs) == OPTIONS.n_layers
    for layer, reference in zip(outputs, expected):
        torch.testing.assert_close(layer, reference, rtol=1e-5, atol=1e-6)
    for (h, c), (h_ref, c_ref) in zip(states, expected_states):
        torch.testing.assert_close(h, h_ref, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(c, c_ref, rtol=1e-5, atol=1e-6)


def test_an_unknown_path_and_dropout_out_of_range_are_refused():
    stack, plan, inputs = _stack_and_batch()
    with pytest.raises(ValueError, match="path must be one of"):
        stack(inputs, plan, path="cudnn")
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        stack.set_dropout(1.0)
