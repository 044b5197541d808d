"""The deferred PyTorch shim: a module set at initialize, predicted without autograd,
and bytes that could run code, allocate without bound or carry damaged weights refused."""
import io
from typing import Any, Dict

import pytest
import srsly
import torch
from thinc.api import ArgsKwargs

from spacy_elmo.errors import WeightsError
from spacy_elmo.models.deferred_shim import DeferredPyTorchShim


def _describe(module: torch.nn.Module) -> Dict[str, Any]:
    return {"width": module[0].in_features}


def _build(settings: Dict[str, Any]) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(settings["width"], 3), torch.nn.Dropout(0.5))


def test_predict_is_the_eval_module_without_autograd():
    torch.manual_seed(0)
    shim = DeferredPyTorchShim(describe=_describe, build=_build)
    assert shim.module is None
    shim.module = _build({"width": 4})
    x = torch.randn(8, 4)
    out = shim.predict(ArgsKwargs(args=(x,), kwargs={}))
    assert out.is_inference() and not out.requires_grad
    assert not shim.module.training  # dropout off: the same output twice
    torch.testing.assert_close(out, shim.predict(ArgsKwargs(args=(x,), kwargs={})), rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(out, shim.module(x), rtol=0, atol=0)
    restored = DeferredPyTorchShim(describe=_describe, build=_build).from_bytes(shim.to_bytes())
    torch.testing.assert_close(restored.predict(ArgsKwargs(args=(x,), kwargs={})), out, rtol=0, atol=0)


def _saved(width: int = 4) -> bytes:
    shim = DeferredPyTorchShim(describe=_describe, build=_build)
    shim.module = _build({"width": width})
    return shim.to_bytes()


def _with_message(data: bytes, **changes: Any) -> bytes:
    """Shim bytes whose inner message (settings, state, checksum) is edited."""
    outer = srsly.msgpack_loads(data)
    inner = srsly.msgpack_loads(outer["state"])
    inner.update(changes)
    outer["state"] = srsly.msgpack_dumps(inner)
    return srsly.msgpack_dumps(outer)


def _state_bytes(state: Dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


class _Payload:
    """Unpickling this creates a file: code run by loading a pipeline."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickle_in_the_state_is_refused_and_never_run(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # as torch < 2.6 loads
    marker = tmp_path / "ran"
    state = {"0.weight": _Payload(str(marker)), "0.bias": torch.zeros(3)}
    data = _with_message(_saved(), state=_state_bytes(state), sha256=None)
    with pytest.raises(WeightsError, match="cannot be read safely"):
        DeferredPyTorchShim(describe=_describe, build=_build).from_bytes(data)
    assert not marker.exists()


def test_settings_larger_than_the_state_are_refused_before_allocating():
    """A tampered width of 10**12 would allocate terabytes if the module were built first."""
    data = _with_message(_saved(), config={"width": 10**12})
    with pytest.raises(WeightsError, match=r"'0.weight' has shape \(3, 4\), but its settings say \(3, 1000000000000\)"):
        DeferredPyTorchShim(describe=_describe, build=_build).from_bytes(data)


def test_non_finite_or_damaged_weights_are_refused():
    state = {"0.weight": torch.full((3, 4), float("nan")), "0.bias": torch.zeros(3)}
    with pytest.raises(WeightsError, match="'0.weight' holds values that are not finite"):
        DeferredPyTorchShim(describe=_describe, build=_build).from_bytes(
            _with_message(_saved(), state=_state_bytes(state), sha256=None)
        )
    inner = srsly.msgpack_loads(srsly.msgpack_loads(_saved())["state"])
    flipped = bytearray(inner["state"])
    flipped[-40] ^= 0xFF
    with pytest.raises(WeightsError, match="do not match their checksum"):
        DeferredPyTorchShim(describe=_describe, build=_build).from_bytes(_with_message(_saved(), state=bytes(flipped)))
