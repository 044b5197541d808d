"""The biLM as a Thinc layer: Docs in, every biLM layer of every token out.

Spans are encoded independently of each other and of the batch, then put back in token order. Whitespace tokens are
not shown to the biLM (it never saw them in training) and get zero vectors.
"""
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Tuple

from spacy.tokens import Doc
from thinc.api import ArgsKwargs, Model, torch2xp, xp2torch
from thinc.types import Floats3d, Ints1d

from ..errors import SettingsError, WeightsError
from .deferred_shim import DeferredPyTorchShim
from .gradients import no_gradient
from .pytorch import formats
from .pytorch.bilm import ElmoBiLM, length_sorted_batches
from .pytorch.char_cnn import TokenVectorCache
from .pytorch.options import BiLMOptions
from .span_cache import SpanCache
from .loaders import WeightsLoaderT
from .types import BiLMModelT, SpanGetterT

NO_WEIGHTS = (
    "The ELMo biLM has no weights yet. Give the elmo component a weights loader at "
    "initialize, e.g. in the config:\n"
    "[initialize.components.elmo.weights_loader]\n"
    '@misc = "spacy-elmo.elmo_weights.v1"\n'
    "model = ${paths.elmo_model}\n"
    "(a model name such as english-compact, or a directory with options.json and "
    "weights.hdf5), or set `size` in the biLM's model config for a randomly initialised biLM."
)
#: Said when Docs reach a biLM layer that was never initialized.
NOT_INITIALIZED = (
    "The ELMo biLM has no weights: the pipeline was not initialized. Call nlp.initialize() first: it loads "
    "the biLM that spacy-elmo ships for the pipeline's language, or the weights in "
    "[initialize.components.elmo.weights_loader] (model = a name such as english-compact, or a directory with "
    "options.json and weights.hdf5)"
)


def build_bilm_layer_v1(
    *,
    get_spans: SpanGetterT,
    size: Optional[str] = None,
    weights_loader: Optional[WeightsLoaderT] = None,
    batch_size: int = 32,
    max_batch_tokens: int = 8192,
) -> BiLMModelT:
    """The ELMo biLM, reading Docs span by span.

    get_spans (Callable): cuts Docs into the spans the biLM reads, e.g.
        ``spacy-elmo.sentence_spans.v1``.
    size (Optional[str]): build a randomly initialised biLM of a named size
        ("tiny", "compact", "small", "medium", "original"). Null (the default): the size
        comes from the weights loaded at initialize.
    weights_loader (Optional[Callable]): load the weights when the model is
        initialized: for a biLM inside another component
        (``spacy-elmo.Tok2VecElmo.v1``), and for the elmo component when
        ``[initialize.components.<name>.weights_loader]`` gives none.
    batch_size (int): the most spans in one forward pass.
    max_batch_tokens (int): the most (padded) tokens in one forward pass.

    *Output:* per Doc, *Shape:* ``(n_layers, n_tokens, width)``.
    """
    if size is not None and weights_loader is not None:
        raise SettingsError("Give the biLM a `size` or a `weights_loader`, not both")
    if batch_size < 1 or max_batch_tokens < 1:
        raise SettingsError("batch_size and max_batch_tokens must be positive")
    model: BiLMModelT = Model(
        "elmo_bilm",
        encode_docs,
        init=partial(init_bilm_layer, weights_loader=weights_loader),
        dims={"nL": None, "nO": None},
        attrs={
            "get_spans": get_spans,
            "batch_size": batch_size,
            "max_batch_tokens": max_batch_tokens,
        },
        shims=[DeferredPyTorchShim(describe=formats.describe, build=formats.rebuild)],
    )
    if size is not None:
        set_bilm(model, ElmoBiLM(BiLMOptions.named(size)))
    return model


def get_bilm(model: BiLMModelT) -> Optional[ElmoBiLM]:
    """The torch biLM inside the layer, or None before initialize."""
    return model.shims[0].module


def set_bilm(model: BiLMModelT, bilm: ElmoBiLM) -> None:
    """Replace the torch biLM; the layer's dims follow its options."""
    model.shims[0].module = bilm
    model.set_dim("nL", bilm.n_output_layers, force=True)
    model.set_dim("nO", bilm.output_dim, force=True)


def load_weights(model: BiLMModelT, weights_loader: WeightsLoaderT) -> None:
    """Put the biLM that ``weights_loader`` returns into the layer."""
    bilm = weights_loader()
    if not isinstance(bilm, ElmoBiLM):
        raise WeightsError(f"The weights loader returned {type(bilm).__name__}, not an ElmoBiLM")
    set_bilm(model, bilm.eval())


def has_weights_loader(model: BiLMModelT) -> bool:
    """Whether the layer's config gave it a ``weights_loader`` (its init runs it)."""
    return model.init.keywords["weights_loader"] is not None


def init_bilm_layer(
    model: BiLMModelT, X: Any = None, Y: Any = None, *, weights_loader: Optional[WeightsLoaderT] = None
) -> None:
    """Load the weights with the layer's own loader (its config's ``weights_loader``)
    unless the biLM already has some (re-initializing a trained pipeline keeps its biLM)."""
    if get_bilm(model) is None:
        if weights_loader is None:
            raise WeightsError(NO_WEIGHTS)
        load_weights(model, weights_loader)


@dataclass
class _SpanWords:
    """One span as the biLM reads it: which Doc, which tokens, their text."""

    doc: int
    tokens: Ints1d
    words: List[str]


def encode_docs(
    model: BiLMModelT,
    docs: List[Doc],
    is_train: bool,
    *,
    span_cache: Optional[SpanCache] = None,
    token_cache: Optional[TokenVectorCache] = None,
) -> Tuple[List[Floats3d], Callable[[List[Floats3d]], List[Doc]]]:
    """The layer's forward pass, with prediction's settings (ignored in training).

    span_cache: gives the layers of spans encoded before and keeps the new ones.
    token_cache: gives the token vectors of words seen before and keeps the new ones.
    """
    bilm = get_bilm(model)
    if bilm is None:
        raise WeightsError(NOT_INITIALIZED)
    ops = model.ops
    n_layers, width = model.get_dim("nL"), model.get_dim("nO")
    outputs = [ops.alloc3f(n_layers, len(doc), width) for doc in docs]
    spans = _span_words(docs, model.attrs["get_spans"], ops)
    cache = None if is_train else span_cache
    pending = []  # the spans to encode (all, unless cached)
    for span in spans:
        cached = cache.get(span.words) if cache is not None else None
        if cached is None:
            pending.append(span)
        else:
            outputs[span.doc][:, span.tokens] = cached
    words = [span.words for span in pending]
    shim = model.shims[0]
    bilm_kwargs: Dict[str, Any] = {} if is_train else {"token_cache": token_cache}
    groups = length_sorted_batches(
        words, batch_size=model.attrs["batch_size"], max_batch_tokens=model.attrs["max_batch_tokens"]
    )
    passes = []  # training: per group, the layers tensor and its backward pass
    for group in groups:
        batch = bilm.prepare([words[i] for i in group])  # on the host: the biLM copies what it needs
        bilm_output, backprop_pass = shim(ArgsKwargs(args=(batch,), kwargs=bilm_kwargs), is_train)
        layers = torch2xp(bilm_output.layers, ops=ops)
        for row, i in enumerate(group):
            span = pending[i]
            span_layers = layers[row, :, : len(span.words)]
            outputs[span.doc][:, span.tokens] = span_layers
            if cache is not None:
                cache.put(span.words, span_layers)
        if is_train:
            passes.append((group, bilm_output.layers, backprop_pass))
    if not is_train:
        return outputs, no_gradient

    def backprop(d_outputs: List[Floats3d]) -> List[Doc]:
        for group, layers_tensor, backprop_pass in passes:
            d_layers = ops.alloc4f(*layers_tensor.shape)
            for row, i in enumerate(group):
                span = pending[i]
                d_layers[row, :, : len(span.words)] = d_outputs[span.doc][:, span.tokens]
            d_tensor = xp2torch(d_layers, device=layers_tensor.device)
            backprop_pass(ArgsKwargs(args=((layers_tensor,),), kwargs={"grad_tensors": (d_tensor,)}))
        return []

    return outputs, backprop


def _span_words(docs: List[Doc], get_spans: SpanGetterT, ops) -> List[_SpanWords]:
    spans = []
    for i, doc_spans in enumerate(get_spans(docs)):
        for span in doc_spans:
            tokens = [token for token in span if not token.is_space]
            if tokens:
                spans.append(
                    _SpanWords(i, ops.asarray1i([t.i for t in tokens]), [t.text for t in tokens])
                )
    return spans

