"""Batched inference over tokenised sentences, in input order.

Sentences are grouped by length inside a window of the input so that batches
carry little padding; every sentence is encoded independently of its batch
(zero initial state), so the grouping never changes a vector.
"""
import warnings
from itertools import islice
from typing import Iterable, Iterator, List, Optional, Sequence, Union

import numpy
import torch

from .bilm import ElmoBiLM, length_sorted_batches
from .char_cnn import TokenVectorCache
from .options import BiLMOptions

Sentence = Sequence[str]
DeviceLike = Union[str, torch.device]

#: Per token, beside the floats :func:`bytes_per_token` counts: character ids, index
#: tensors, the recurrence's per-step tensors (measured: 6 to 8 KB).
TOKEN_OVERHEAD_BYTES = 16 * 1024
#: ``max_length=None`` (auto) keeps a sentence whole while its encoding fits in this much memory.
LINE_MEMORY_BYTES = 2**30
#: The most sentence numbers a warning names.
MAX_NAMED = 10


class ElmoEmbedder:
    """Runs an :class:`ElmoBiLM` over many sentences with bounded memory.

    :param bilm: the model; it is put in eval mode on `device`.
    :param batch_size: sentences per forward pass.
    :param max_batch_tokens: also cap the tokens in one forward pass (a batch
        of very long sentences is split further).
    :param sort_window: how many batches' worth of input is sorted by length at
        a time; 1 keeps the input order inside each batch.
    :param token_cache_size: keep the token vectors of up to this many distinct
        words, so a word seen before skips the character CNN (0: off).
    :param precision: "fp32", or "int8" for the LSTM's products on an x86 CPU
        with AVX2 or VNNI: set on `bilm` (:attr:`ElmoBiLM.precision`).
    :param max_length: a sentence longer than this many tokens is encoded in
        spans of at most this many (each from a zero state, as in the spaCy
        component), so memory stays bounded on any input; None (auto): as many
        as one sentence's encoding holds in :data:`LINE_MEMORY_BYTES` (7,825 for
        english-compact), so every shorter sentence gets the reference's vectors.
    """

    def __init__(
        self,
        bilm: ElmoBiLM,
        *,
        batch_size: int = 32,
        max_batch_tokens: int = 8192,
        sort_window: int = 64,
        token_cache_size: int = 50_000,
        precision: str = "fp32",
        max_length: Optional[int] = None,
        device: DeviceLike = "cpu",
    ) -> None:
        if batch_size < 1 or max_batch_tokens < 1 or sort_window < 1 or (max_length is not None and max_length < 1):
            raise ValueError("batch_size, max_batch_tokens, sort_window and max_length must be positive")
        self.auto_length = max_length is None
        self.max_length = max_length or max_tokens_per_line(bilm.options, LINE_MEMORY_BYTES)
        #: The (1-based) numbers of the sentences the last :meth:`embed` cut into spans.
        self.cut: List[int] = []
        self.token_cache = TokenVectorCache(token_cache_size)
        self.device = torch.device(device)
        self.bilm = bilm.to(self.device).eval()
        self.bilm.precision = precision
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.sort_window = sort_window

    def embed(self, sentences: Iterable[Sentence], *, warn: bool = True) -> Iterator[numpy.ndarray]:
        """Yield each sentence's layers in input order; a sentence longer than
        `max_length` is cut (:attr:`cut`), and with `warn` one warning says so at the end.

        *Shape:* ``(n_layers + 1, n_tokens, 2 * projection_dim)``, float32.
        """
        iterator = iter(sentences)
        window_size = self.batch_size * self.sort_window
        self.cut = []
        seen = 0
        while True:
            window = [list(s) for s in islice(iterator, window_size)]
            if not window:
                if self.cut and warn:
                    warnings.warn(self.describe_cut(), stacklevel=2)
                return
            self.cut.extend(seen + i + 1 for i, sentence in enumerate(window) if len(sentence) > self.max_length)
            seen += len(window)
            # Long sentences as spans of at most max_length tokens, joined again below.
            spans: List[Sentence] = []
            n_spans = []
            for sentence in window:
                sentence_spans = [sentence[i : i + self.max_length] for i in range(0, len(sentence), self.max_length)]
                spans.extend(sentence_spans or [sentence])
                n_spans.append(max(len(sentence_spans), 1))
            results: List[Optional[numpy.ndarray]] = [None] * len(spans)
            batches = length_sorted_batches(
                spans, batch_size=self.batch_size, max_batch_tokens=self.max_batch_tokens
            )
            for indices in batches:
                layers = self.embed_batch([spans[i] for i in indices])
                for i, array in zip(indices, layers):
                    results[i] = array
            start = 0
            for count in n_spans:
                parts = results[start : start + count]
                start += count
                yield parts[0] if count == 1 else numpy.concatenate(parts, axis=1)  # type: ignore[misc]

    def describe_cut(self, noun: str = "sentence", setting: str = "max_length") -> str:
        """The sentences of :attr:`cut`, e.g. "2 sentences longer than 300 tokens (sentences
        4, 9) were cut into spans of 300 (max_length 300); their vectors differ from an uncut run's"."""
        one = len(self.cut) == 1
        how = f"auto: {LINE_MEMORY_BYTES / 2**30:g} GiB of memory per {noun}" if self.auto_length else self.max_length
        return (
            f"{len(self.cut)} {noun if one else noun + 's'} longer than {self.max_length:,} tokens "
            f"({name_numbers(self.cut, noun)}) {'was' if one else 'were'} cut into spans of {self.max_length:,} "
            f"({setting} {how}); {'its' if one else 'their'} vectors differ from an uncut run's"
        )

    def embed_batch(self, sentences: Sequence[Sentence]) -> List[numpy.ndarray]:
        """Encode one batch in a single forward pass; one array per sentence."""
        with torch.inference_mode():
            batch = self.bilm.prepare(sentences)  # on the host: the biLM copies what it needs
            layers = self.bilm(batch, token_cache=self.token_cache).layers.to("cpu", torch.float32).numpy()
        return [layers[i, :, : len(s)] for i, s in enumerate(sentences)]


def bytes_per_token(options: BiLMOptions) -> int:
    """The most memory one token of a line takes while the biLM encodes the line.

    The peak is the character CNN's largest filter bank over every window of a 50-character token, then the output
    layers and the LSTM's outputs (float32), plus a fixed overhead. Measured on distinct 48-byte tokens: 218 KB
    (`small`; this gives 228 KB), 124 KB (english-compact; 137 KB), 23 KB (the test fixture; 34 KB)."""
    chars = options.max_characters_per_token
    cnn = chars * options.char_embedding_dim + max(
        (chars - width + 1) * (count + width * options.char_embedding_dim) for width, count in options.filters
    )
    outputs = (2 * options.n_output_layers + options.n_layers) * options.output_dim
    return 4 * (cnn + outputs) + TOKEN_OVERHEAD_BYTES


def max_tokens_per_line(options: BiLMOptions, memory_bytes: int) -> int:
    """The longest line whose encoding fits in `memory_bytes` (`--max-length auto`)."""
    return max(1, memory_bytes // bytes_per_token(options))


def name_numbers(numbers: Sequence[int], noun: str) -> str:
    """E.g. "line 4", "lines 1, 3" or "lines 1, 2, ..., 10 and 5 more"."""
    named = ", ".join(str(n) for n in numbers[:MAX_NAMED])
    more = f" and {len(numbers) - MAX_NAMED} more" if len(numbers) > MAX_NAMED else ""
    return f"{noun if len(numbers) == 1 else noun + 's'} {named}{more}"
