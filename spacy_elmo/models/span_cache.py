"""The layers of each distinct span, kept while a frozen biLM trains its listeners.

A frozen biLM gives a span the same layers every time, so training needs them once per distinct span, not per epoch
(the paper precomputes them too); spans beyond ``max_bytes`` are computed each time.
"""
from typing import Dict, Optional, Sequence, Tuple

from thinc.types import Floats3d


class SpanCache:
    """Layers *Shape:* ``(n_layers, n_words, width)`` per span, keyed by its words."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.n_bytes = 0
        self.hits = self.misses = 0
        self._layers: Dict[Tuple[str, ...], Floats3d] = {}
        self._source: Optional[object] = None

    def serve(self, source: object) -> None:
        """Hold layers of `source` (the biLM): another biLM empties the cache first."""
        if source is not self._source:
            self.clear()
            self._source = source

    def get(self, words: Sequence[str]) -> Optional[Floats3d]:
        layers = self._layers.get(tuple(words))
        if layers is None:
            self.misses += 1
        else:
            self.hits += 1
        return layers

    def put(self, words: Sequence[str], layers: Floats3d) -> None:
        key = tuple(words)
        if key not in self._layers and self.n_bytes + layers.nbytes <= self.max_bytes:
            self._layers[key] = layers.copy()
            self.n_bytes += layers.nbytes

    def clear(self) -> None:
        self._source = None
        self._layers.clear()
        self.n_bytes = 0
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._layers)


