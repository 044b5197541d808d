"""The deferred PyTorch shim: a module set at initialize, predicted without autograd."""
from typing import Any, Dict

import torch
from thinc.api import ArgsKwargs

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
