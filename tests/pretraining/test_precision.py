"""The number format of training and evaluation: bfloat16 autocast or float32."""
import pytest
import torch

from spacy_elmo.pretraining.precision import (
    TRAINING_PRECISIONS,
    autocast,
    autocast_dtype,
)

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_the_training_precisions_are_auto_bf16_and_fp32():
    assert TRAINING_PRECISIONS == ("auto", "bf16", "fp32")


@pytest.mark.parametrize("device", [CPU, CUDA])
def test_bf16_is_bfloat16_and_fp32_is_float32_on_any_device(device):
    assert autocast_dtype("bf16", device) is torch.bfloat16
    assert autocast_dtype("fp32", device) is None


def test_auto_is_bfloat16_on_a_gpu_and_float32_elsewhere():
    assert autocast_dtype("auto", CUDA) is torch.bfloat16
    assert autocast_dtype("auto", CPU) is None
    assert autocast_dtype("auto", torch.device("meta")) is None


def test_autocast_to_bfloat16_runs_matmuls_in_bfloat16():
    a, b = torch.ones(2, 3), torch.ones(3, 2)
    with autocast(torch.bfloat16, CPU):
        assert torch.is_autocast_enabled("cpu") and (a @ b).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")


def test_autocast_to_none_leaves_float32():
    with autocast(None, CPU):
        assert not torch.is_autocast_enabled("cpu")
        assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.float32
