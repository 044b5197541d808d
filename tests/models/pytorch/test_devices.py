"""Devices: copies from the host (pinned and non-blocking to a GPU) and autocast there."""
import pytest
import torch

from spacy_elmo.models.pytorch.devices import autocast_enabled, autocast_off, to_device


def test_none_goes_to_any_device_as_none():
    assert to_device(None, "cuda") is None


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")])
def test_a_host_tensor_to_the_host_is_the_same_tensor(device):
    tensor = torch.arange(3)
    assert to_device(tensor, device) is tensor


def test_a_host_tensor_to_another_device_is_a_copy_there_of_its_shape_and_dtype():
    moved = to_device(torch.zeros(2, 3, dtype=torch.int16), "meta")
    assert moved.is_meta and moved.shape == (2, 3) and moved.dtype == torch.int16


def test_a_host_tensor_goes_to_a_gpu_from_pinned_memory_without_blocking(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: calls.append("pin") or self)
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *args, **kwargs: calls.append((args, kwargs)) or self)
    to_device(torch.zeros(2), "cuda:1")
    assert calls == ["pin", ((torch.device("cuda:1"),), {"non_blocking": True})]
    calls.clear()
    to_device(torch.zeros(2), "meta")
    assert calls == [((torch.device("meta"),), {})]  # not pinned: no GPU to copy to


def test_autocast_enabled_follows_the_autocast_of_the_device_type():
    assert not autocast_enabled("cpu")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert autocast_enabled("cpu") and not autocast_enabled("meta")


def test_autocast_off_turns_autocast_off_inside_and_back_on_after():
    a, b = torch.ones(2, 3), torch.ones(3, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with autocast_off("cpu"):
            assert not autocast_enabled("cpu") and (a @ b).dtype == torch.float32
        assert autocast_enabled("cpu") and (a @ b).dtype == torch.bfloat16


def test_autocast_off_on_a_device_without_autocast_changes_nothing():
    with torch.autocast("cpu", dtype=torch.bfloat16), autocast_off("meta"):
        assert autocast_enabled("cpu")
