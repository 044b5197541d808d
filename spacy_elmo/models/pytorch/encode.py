"""Encoding one batch of token lists: character ids on the model's device, one
forward pass."""
from typing import Callable, Sequence, TypeVar, Union

import torch

from .char_ids import batch_to_char_ids

Sentence = Sequence[str]
DeviceLike = Union[str, torch.device]
T = TypeVar("T")


def encode(
    forward: Callable[[torch.Tensor], T], sentences: Sequence[Sentence], device: DeviceLike
) -> T:
    """Run ``forward`` once over the character ids of ``sentences``.

    :param forward: an :class:`~.bilm.ElmoBiLM` (returns a
        :class:`~.bilm.BiLMOutput`), or anything called the same way, e.g. a
        Thinc shim's call that also returns a backprop callback.
    :param sentences: token lists; the batch's character ids have
        *Shape:* ``(n_sentences, max_tokens, 50)``.
    :param device: where the character ids go (the model's device).

    Gradients follow the caller's context: wrap the call in
    ``torch.inference_mode()`` for inference.
    """
    return forward(batch_to_char_ids(sentences).to(device))
