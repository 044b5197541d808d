"""oneDNN-prepacked weights: the product they compute, when the fast path declines
(the caller falls back), repacking after an update, and copies that start empty."""
import copy
import pickle

import pytest
import torch

from spacy_elmo.models.pytorch import prepacked_linear
from spacy_elmo.models.pytorch.prepacked_linear import (
    MIN_ROWS,
    PrepackedWeights,
    onednn_linear_available,
)

pytestmark = pytest.mark.skipif(not onednn_linear_available(), reason="this torch has no oneDNN linear")


def _operands(rows=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, 6, generator=generator), torch.randn(6, 5, generator=generator),
            torch.randn(5, generator=generator))


def test_the_product_is_bias_plus_x_times_weight_and_without_a_bias_x_times_weight():
    x, weight, bias = _operands()
    packed = PrepackedWeights()
    with torch.no_grad():
        torch.testing.assert_close(packed.matmul(x, weight, (0,), bias=bias), bias + x @ weight)
        torch.testing.assert_close(packed.matmul(x, weight, (1,)), x @ weight)


@pytest.mark.parametrize("case", ["few rows", "above max_rows", "float64", "x needs grad", "bias needs grad",
                                  "inference weight", "disabled"])
def test_the_fast_path_declines_and_packs_nothing(case):
    x, weight, bias = _operands(rows=MIN_ROWS - 1 if case == "few rows" else 8)
    packed, max_rows = PrepackedWeights(), 7 if case == "above max_rows" else None
    if case == "float64":
        x, weight = x.double(), weight.double()
    x.requires_grad_(case == "x needs grad")
    bias.requires_grad_(case == "bias needs grad")
    if case == "inference weight":
        with torch.inference_mode():
            weight = weight.clone()
    packed.enabled = case != "disabled"
    assert packed.matmul(x, weight, (0,), bias=bias, max_rows=max_rows) is None
    assert not packed._packed


def test_inputs_that_need_grad_take_the_fast_path_where_grad_is_off():
    x, weight, _ = _operands()
    with torch.no_grad():
        assert PrepackedWeights().matmul(x.requires_grad_(), weight.requires_grad_(), (0,)) is not None


def test_a_weight_is_packed_once_and_again_after_it_changes_in_place():
    x, weight, _ = _operands()
    packed = PrepackedWeights()
    with torch.no_grad():
        packed.matmul(x, weight, (0,))
        first = packed._packed[(0,)][1]
        packed.matmul(x, weight, (0,))
        assert packed._packed[(0,)][1] is first
        weight.mul_(2)
        torch.testing.assert_close(packed.matmul(x, weight, (0,)), x @ weight)
    assert packed._packed[(0,)][1] is not first


def test_a_failing_reorder_disables_the_fast_path(monkeypatch):
    def refuse(*args):
        raise RuntimeError("no oneDNN kernel")

    monkeypatch.setattr(prepacked_linear.torch.ops.mkldnn, "_reorder_linear_weight", refuse)
    packed = PrepackedWeights()
    with torch.no_grad():
        assert packed.matmul(*_operands()[:2], (0,)) is None
    assert packed.enabled is False


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda packed: pickle.loads(pickle.dumps(packed))],
                         ids=["deepcopy", "pickle"])
def test_clear_and_copies_forget_the_packed_weights(clone):
    x, weight, _ = _operands()
    packed = PrepackedWeights()
    with torch.no_grad():
        packed.matmul(x, weight, (0,))
    copied = clone(packed)
    assert isinstance(copied, PrepackedWeights) and copied._packed == {} and packed._packed
    packed.clear()
    assert packed._packed == {}
