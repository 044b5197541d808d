"""The ``elmo`` pipeline component.

``Doc.tensor`` is a shared slot: a later ``tok2vec`` overwrites it, so put ``elmo`` before ``tok2vec`` (spaCy's tok2vec
listeners read ``Doc.tensor`` at prediction time). The vector hooks and ELMo listeners read ``doc._.elmo`` instead.
"""
from contextlib import contextmanager
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence

import srsly
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, Optimizer, set_dropout_rate
from thinc.types import Floats3d

from ..doc_data import (
    DOC_TENSOR_MIXES, EXTENSION, ElmoDocData, in_spacy_worker_process, install_extensions,
    keep_hooks_across_processes, set_vector_hooks,
)
from ..errors import SettingsError, SpacyElmoError, WeightsError, one_line
from ..input_files import check_regular_file
from ..models.bilm_layer import encode_docs, get_bilm, has_weights_loader, load_weights
from ..models.gradients import no_gradient
from ..models.tok2vec_elmo import replace_listener, replace_listener_cfg
from ..models.listener import ElmoListener, check_upstream
from ..models.loaders import WeightsLoaderT, build_elmo_weights_loader_v1
from ..models.pytorch.char_cnn import TokenVectorCache
from ..models.pytorch.lstm.int8_products import check_precision
from ..models.span_cache import SpanCache
from ..models.types import BiLMModelT
from .command_errors import one_line_in_spacy_commands

DEFAULT_CONFIG = Config().from_str(
    """
    [model]
    @architectures = "spacy-elmo.ElmoBiLM.v1"
    size = null
    batch_size = 32
    max_batch_tokens = 8192

    [model.get_spans]
    @misc = "spacy-elmo.sentence_spans.v2"
    max_length = 256
    punct_chars = null
    """
)


def make_elmo(
    nlp: Language,
    name: str,
    model: BiLMModelT,
    frozen: bool,
    doc_tensor: Optional[str],
    vector_hooks: bool,
    frozen_cache_mb: int,
    token_cache_size: int,
    precision: str,
) -> "ElmoComponent":
    """Create the elmo component (factory ``elmo``).

    model (Model): the biLM layer, ``spacy-elmo.ElmoBiLM.v1``.
    frozen (bool): keep the biLM fixed (the paper's recipe); false fine-tunes it
        with the gradients of all listeners.
    doc_tensor (Optional[str]): what goes in ``Doc.tensor``: "mean" (the
        average of all layers), "top" (the last biLSTM layer) or null (nothing).
    vector_hooks (bool): make token, span and Doc ``.vector`` and
        ``.similarity`` read ``Doc.tensor`` (when ``doc_tensor`` is set).
    frozen_cache_mb (int): in training with a frozen biLM, keep the layers of up
        to this many MB of distinct spans, so each is encoded once per run
        rather than once per epoch (0: off). The memory is on the biLM's device
        and is held as long as the component.
    token_cache_size (int): in prediction, keep the token-layer vectors (character
        CNN, highway, projection) of up to this many distinct words, so a word
        seen before skips them; emptied whenever the weights change (0: off).
    precision (str): "fp32" (exact), or "int8": the biLM's LSTM products in int8
        on an x86 CPU with AVX2 or VNNI, where int8 is faster for that CPU and
        product size, wherever it runs without gradients (the vectors differ
        slightly). A loaded pipeline takes the value of its load-time config.
    """
    keep_hooks_across_processes(nlp)  # Docs from nlp.pipe(n_process=2) get their vector hooks back
    return ElmoComponent(
        nlp.vocab, model, name=name, frozen=frozen, doc_tensor=doc_tensor, vector_hooks=vector_hooks,
        frozen_cache_mb=frozen_cache_mb, token_cache_size=token_cache_size, precision=precision,
    )


class ElmoComponent(TrainablePipe):
    """Runs the biLM and shares its layers with listening components."""

    def __init__(
        self,
        vocab: Vocab,
        model: BiLMModelT,
        name: str = "elmo",
        *,
        frozen: bool = True,
        doc_tensor: Optional[str] = "mean",
        vector_hooks: bool = True,
        frozen_cache_mb: int = 1024,
        token_cache_size: int = 50_000,
        precision: str = "fp32",
    ) -> None:
        if frozen_cache_mb < 0:
            raise SettingsError(f"frozen_cache_mb must be 0 (off) or more, got {frozen_cache_mb}")
        if token_cache_size < 0:
            raise SettingsError(f"token_cache_size must be 0 (off) or more, got {token_cache_size}")
        if doc_tensor is not None and doc_tensor not in DOC_TENSOR_MIXES:
            raise SettingsError(
                f"doc_tensor must be one of {', '.join(DOC_TENSOR_MIXES)} or null, got {doc_tensor!r}"
            )
        install_extensions()
        self.vocab = vocab
        self.model = model
        self.name = name
        self.doc_tensor = doc_tensor
        self.vector_hooks = vector_hooks
        self.listener_map: Dict[str, List[ElmoListener]] = {}
        self.cfg: Dict[str, Any] = {}
        self.model.attrs["replace_listener"] = replace_listener
        self.span_cache = SpanCache(max_bytes=frozen_cache_mb * 2**20)
        self.token_cache = TokenVectorCache(token_cache_size) if token_cache_size > 0 else None
        self.precision = precision
        self.frozen = frozen

    @property
    def precision(self) -> str:
        """"fp32" or "int8" (see the factory); settable on a loaded pipeline."""
        return self._precision

    @precision.setter
    def precision(self, value: str) -> None:
        bilm = get_bilm(self.model)
        if bilm is None:
            check_precision(value)  # now: the biLM gets it once loaded (initialize, from_disk, from_bytes)
        else:
            bilm.precision = value
        self._precision = value

    @property
    def frozen(self) -> bool:
        return self._frozen

    @frozen.setter
    def frozen(self, value: bool) -> None:
        self._frozen = value
        self.span_cache.clear()
        # Listeners replaced by an inline copy inherit the setting in their config.
        self.model.attrs["replace_listener_cfg"] = partial(replace_listener_cfg, frozen=value)

    @property
    def is_trainable(self) -> bool:
        """A frozen biLM is not trained: spaCy neither updates it nor logs a loss for it."""
        return not self.frozen

    # Listeners (as spaCy's Tok2Vec) ------------------------------------------------

    @property
    def listeners(self) -> List[ElmoListener]:
        return [m for c in self.listening_components for m in self.listener_map[c]]

    @property
    def listening_components(self) -> List[str]:
        return list(self.listener_map.keys())

    def add_listener(self, listener: ElmoListener, component_name: str) -> None:
        self.listener_map.setdefault(component_name, [])
        if listener not in self.listener_map[component_name]:
            self.listener_map[component_name].append(listener)
        if self.model.has_dim("nL"):
            listener.set_upstream_dims(self.model.get_dim("nL"), self.model.get_dim("nO"))

    def remove_listener(self, listener: ElmoListener, component_name: str) -> bool:
        if listener in self.listener_map.get(component_name, []):
            self.listener_map[component_name].remove(listener)
            if not self.listener_map[component_name]:
                del self.listener_map[component_name]
            return True
        return False

    def find_listeners(self, component: Any) -> None:
        """Link the ELMo listeners in ``component``'s model whose upstream is this
        component's name or "*"."""
        names = ("*", self.name)
        if isinstance(getattr(component, "model", None), Model):
            for node in component.model.walk():
                if isinstance(node, ElmoListener) and node.upstream_name in names:
                    self.add_listener(node, component.name)

    # Prediction ----------------------------------------------------------------------

    def predict(self, docs: Iterable[Doc]) -> List[Floats3d]:
        """Every layer of every token, per Doc *Shape:* ``(n_layers, n_tokens, width)``."""
        return self._encode_without_gradient(list(docs))

    def _encode_without_gradient(self, docs: List[Doc], span_cache: Optional[SpanCache] = None) -> List[Floats3d]:
        outputs, _ = encode_docs(
            self.model, docs, is_train=False, span_cache=span_cache, token_cache=self.token_cache,
        )
        return outputs

    def set_annotations(self, docs: Sequence[Doc], layers: List[Floats3d]) -> None:
        """Set ``doc._.elmo`` and, per ``doc_tensor``, ``Doc.tensor``."""
        install_extensions()
        hooks = self.doc_tensor if self.vector_hooks else None
        here = not in_spacy_worker_process()  # a worker's Docs travel as bytes: their hooks are set on arrival
        for doc, doc_layers in zip(docs, layers):
            data = ElmoDocData(layers=doc_layers, hooks=hooks)
            setattr(doc._, EXTENSION, data)
            if self.doc_tensor is not None:
                doc.tensor = data.mixed(self.doc_tensor)
            if hooks is not None and here:
                set_vector_hooks(doc, hooks)

    # Training ------------------------------------------------------------------------

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Run the biLM on the batch and hand its layers to every listener.

        Frozen: the layers come from a prediction, nothing flows back and no loss is recorded. Otherwise the last
        listener's backprop runs the biLM's backward on the listeners' summed gradients; the loss is their squared norm
        (as spaCy's Tok2Vec)."""
        if losses is None:
            losses = {}
        validate_examples(examples, "ElmoComponent.update")
        if not self.frozen:
            losses.setdefault(self.name, 0.0)
        docs = [eg.predicted for eg in examples]
        if not self.listeners:
            return losses
        if self.frozen:
            # Fixed weights: each distinct span is encoded once per training run.
            self.span_cache.serve(get_bilm(self.model))
            outputs = self._encode_without_gradient(docs, self.span_cache)
            accumulate_gradient = backprop = no_gradient
        else:
            set_dropout_rate(self.model, drop)
            outputs, backprop_bilm = self.model.begin_update(docs)
            d_outputs = [self.model.ops.alloc3f(*layers.shape) for layers in outputs]

            def accumulate_gradient(one_d_outputs: List[Floats3d]) -> List[Doc]:
                for total, d in zip(d_outputs, one_d_outputs):
                    total += d
                    losses[self.name] += float((d**2).sum())
                return []

            def backprop(one_d_outputs: List[Floats3d]) -> List[Doc]:
                accumulate_gradient(one_d_outputs)
                d_docs = backprop_bilm(d_outputs)
                if sgd is not None:
                    self.finish_update(sgd)
                return d_docs

        batch_id = ElmoListener.get_batch_id(docs)
        for listener in self.listeners[:-1]:
            listener.receive(batch_id, outputs, accumulate_gradient)
        self.listeners[-1].receive(batch_id, outputs, backprop)
        return losses

    def finish_update(self, sgd: Optimizer) -> None:
        """Update the biLM, unless it is frozen."""
        if not self.frozen:
            self.model.finish_update(sgd)

    def get_loss(self, examples: Iterable[Example], scores: Any) -> None:
        """The loss comes from the listening components (see ``update``)."""
        return None

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        weights_loader: Optional[WeightsLoaderT] = None,
    ) -> None:
        """Load the biLM (``weights_loader``, e.g. ``spacy-elmo.elmo_weights.v1``)
        and size the listeners for it. Without a loader the biLM keeps the
        weights it has (a trained pipeline), or is loaded by the loader in its
        model config (``[components.elmo.model.weights_loader]``), or gets the
        biLM that spacy-elmo ships for the pipeline's language (a clear error
        for other languages)."""
        examples = list(islice(get_examples(), 10))  # may be empty: only weights are needed
        validate_examples(examples, "ElmoComponent.initialize")
        if nlp is not None:
            elmo_components = [name for name, component in nlp.pipeline if isinstance(component, ElmoComponent)]
            for name, component in nlp.pipeline:
                if isinstance(getattr(component, "model", None), Model):
                    check_upstream(component.model, name, elmo_components, nlp.pipe_names)
        if weights_loader is None and get_bilm(self.model) is None and not has_weights_loader(self.model):
            weights_loader = build_elmo_weights_loader_v1(lang=self.vocab.lang)
        with one_line_in_spacy_commands():  # `spacy train` offline: one line, no traceback
            if weights_loader is not None:
                load_weights(self.model, weights_loader)
            self.model.initialize(X=[eg.predicted for eg in examples] or None)
        for listener in self.listeners:
            listener.set_upstream_dims(self.model.get_dim("nL"), self.model.get_dim("nO"))
        self.precision = self.precision  # onto the biLM just loaded

    # Serialization ---------------------------------------------------------------------

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> "ElmoComponent":
        saved_model = partial(_model_bytes, bytes_data)
        with _load_errors_as_one_line("The serialized ELMo component", self.model, saved_model):
            super().from_bytes(bytes_data, exclude=exclude)
        self.precision = self.precision  # onto the biLM just loaded
        return self

    def from_disk(self, path: Any, *, exclude: Iterable[str] = tuple()) -> "ElmoComponent":
        for name in ("cfg", "model"):
            check_regular_file(Path(path) / name, WeightsError, f"The ELMo component's {name}")
        saved_model = (Path(path) / "model").read_bytes
        with _load_errors_as_one_line(f"The ELMo component in {path}", self.model, saved_model):
            super().from_disk(path, exclude=exclude)
        self.precision = self.precision  # onto the biLM just loaded
        return self


@contextmanager
def _load_errors_as_one_line(what: str, model: BiLMModelT, saved_model: Callable[[], bytes]) -> Iterator[None]:
    """msgpack's and Thinc's errors on cut or altered bytes, or on a saved biLM of
    another size than `model`'s, as one line naming `what`.

    saved_model: reads the saved model's bytes, only when loading failed.
    """
    sizes = _sizes(model.maybe_get_dim("nL"), model.maybe_get_dim("nO"))
    try:
        yield
    except SpacyElmoError:
        raise
    except (ValueError, KeyError, TypeError) as err:
        saved_sizes = _saved_sizes(saved_model)
        if sizes is not None and saved_sizes is not None and saved_sizes != sizes:
            raise WeightsError(
                f"{what} has a biLM of another size: the saved elmo component has {saved_sizes}, the "
                f"component it is loaded into has {sizes} (load a saved pipeline with spacy.load, which "
                "builds each component from its own config)"
            ) from None
        raise WeightsError(f"{what} is damaged or incomplete ({one_line(err, 200)})") from None


def _model_bytes(component_bytes: bytes) -> bytes:
    """The model's bytes inside a component's bytes (``TrainablePipe.to_bytes``)."""
    return srsly.msgpack_loads(component_bytes)["model"]


def _sizes(n_layers: Optional[int], width: Optional[int]) -> Optional[str]:
    """The biLM's sizes as the user set them in options.json, from the layer's dims
    nL (LSTM layers + 1) and nO (2 x projection_dim); None before it has a biLM."""
    if n_layers is None or width is None:
        return None
    return f"projection_dim {width // 2} and {n_layers - 1} LSTM layers"


def _saved_sizes(saved_model: Callable[[], bytes]) -> Optional[str]:
    """The sizes of the biLM in a saved model's bytes (its first node is the biLM
    layer, as ``Model.walk`` lists it), or None where they cannot be read."""
    try:
        dims = srsly.msgpack_loads(saved_model())["nodes"][0]["dims"]
        return _sizes(int(dims["nL"]), int(dims["nO"]))
    except Exception:  # damaged bytes: the caller reports them as such
        return None


Language.factory(
    "elmo",
    assigns=[f"doc._.{EXTENSION}", "doc.tensor"],
    default_config={
        "model": DEFAULT_CONFIG["model"],
        "frozen": True,
        "doc_tensor": "mean",
        "vector_hooks": True,
        "frozen_cache_mb": 1024,
        "token_cache_size": 50_000,
        "precision": "fp32",
    },
)(make_elmo)
