"""Gradient plumbing shared by the Thinc layers."""
from typing import Any, List, Sequence, TypeVar

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
