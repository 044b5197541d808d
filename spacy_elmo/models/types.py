"""Type aliases of the Thinc layers, with the shapes they pass around.

``Floats3d`` below is always one Doc's biLM layers, *Shape:*
``(n_layers, n_tokens, width)`` where ``n_layers`` is L + 1 (the token layer
plus one per LSTM layer) and ``width`` is ``2 * projection_dim``.
"""
from typing import Callable, Iterable, List, Tuple

from spacy.tokens import Doc, Span
from thinc.api import Model
from thinc.types import Floats2d, Floats3d

#: Docs in, every biLM layer of every token out.
BiLMModelT = Model[List[Doc], List[Floats3d]]
#: Each Doc's layers in, one mixed vector per token out.
ScalarMixModelT = Model[List[Floats3d], List[Floats2d]]
#: The per-task head: Docs and their layers in, token features out.
TaskHeadInT = Tuple[List[Doc], List[Floats3d]]
TaskHeadModelT = Model[TaskHeadInT, List[Floats2d]]
#: What downstream components use as their tok2vec.
Tok2VecModelT = Model[List[Doc], List[Floats2d]]
#: The backprop callback a listener receives from the elmo component.
LayersBackpropT = Callable[[List[Floats3d]], List[Doc]]
#: Splits Docs into the spans the biLM reads one at a time (sentences, or bounded spans).
SpanGetterT = Callable[[Iterable[Doc]], List[List[Span]]]
