"""Gradient plumbing shared by the Thinc layers."""
from typing import Any, List, Sequence, TypeVar

from ..errors import SettingsError, is_finite_number

ArrayT = TypeVar("ArrayT")


def no_gradient(d_outputs: Any) -> List[Any]:
    """The backprop of an output that sends no gradient back (prediction, a
    frozen biLM, Docs as input)."""
    return []


def scale_gradients(gradients: Sequence[ArrayT], factor: float) -> List[ArrayT]:
    """Each gradient times ``factor`` (a listener's ``grad_factor`` before the
    gradients reach a fine-tuned biLM); unchanged when ``factor`` is 1."""
    if factor == 1.0:
        return list(gradients)
    return [d * factor for d in gradients]  # type: ignore[operator]


def check_grad_factor(grad_factor: Any) -> float:
    """A listener's ``grad_factor``: a finite number (NaN would reach every weight of a fine-tuned biLM)."""
    if not is_finite_number(grad_factor):
        raise SettingsError(f"grad_factor must be a finite number, got {grad_factor!r}")
    return float(grad_factor)
