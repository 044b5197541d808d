"""``ElmoListener``: a downstream component's connection to the elmo component.

Each listener mixes the shared layers with its own scalar mix, saved with the listening component. In training it is
handed outputs and a backprop callback (``receive``); in prediction it reads ``doc._.elmo``.
"""
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d, Floats3d

from ..doc_data import doc_data
from ..errors import SettingsError
from .task_head import build_task_head, set_task_head_dims, zero_layers
from .gradients import check_grad_factor, scale_gradients
from .types import LayersBackpropT, ScalarMixModelT, TaskHeadModelT, Tok2VecModelT


def build_elmo_listener_v1(
    *,
    mixer: ScalarMixModelT,
    token_embedding: Optional[Tok2VecModelT] = None,
    width: Optional[int] = None,
    upstream: str = "*",
    grad_factor: float = 1.0,
) -> "ElmoListener":
    """Listen to an elmo component and mix its layers for this component.

    mixer (Model): this component's scalar mix (``spacy-elmo.ScalarMix.v1``).
    token_embedding (Optional[Model]): vectors concatenated before the mix, the
        paper's ``[x_k; ELMo_k]``: a small context-independent embedding such as
        ``spacy.MultiHashEmbed.v2``, or ``spacy.Tok2VecListener.v1`` to add ELMo
        to a shared CNN tok2vec.
    width (Optional[int]): project the concatenation to this width (a
        layer-normalised maxout). Null keeps it: the output width is then the
        embedding's plus the biLM's (``2 * projection_dim``).
    upstream (str): the name of the elmo component, or "*" for any.
    grad_factor (float): scales the gradient sent to a fine-tuned biLM.
    """
    head = build_task_head(mixer=mixer, token_embedding=token_embedding, width=width)
    return ElmoListener(upstream_name=upstream, head=head, grad_factor=check_grad_factor(grad_factor))


class ElmoListener(Model):
    """A layer fed by the upstream elmo component (see the module docstring)."""

    name = "elmo_listener"

    def __init__(self, *, upstream_name: str, head: TaskHeadModelT, grad_factor: float) -> None:
        Model.__init__(
            self,
            name=self.name,
            forward=listener_forward,
            init=init_listener,
            dims={"nO": head.maybe_get_dim("nO")},
            layers=[head],
            attrs={"grad_factor": grad_factor},
        )
        self.upstream_name = upstream_name
        self._batch_id: Optional[int] = None
        self._outputs: Optional[List[Floats3d]] = None
        self._backprop: Optional[LayersBackpropT] = None

    @property
    def head(self) -> TaskHeadModelT:
        """This component's task head (scalar mix, optional embedding and projection)."""
        return self.layers[0]

    def set_upstream_dims(self, n_layers: int, width: int) -> None:
        """Size this listener for its upstream biLM (called on linking)."""
        set_task_head_dims(self.head, n_layers, width)
        if self.head.has_dim("nO"):
            self.set_dim("nO", self.head.get_dim("nO"))

    @staticmethod
    def get_batch_id(docs: Iterable[Doc]) -> int:
        """A content hash of a batch, to check a listener got its own batch."""
        return sum(sum(token.orth for token in doc) for doc in docs)

    def receive(self, batch_id: int, outputs: List[Floats3d], backprop: LayersBackpropT) -> None:
        """Store the elmo component's outputs for a training batch."""
        self._batch_id = batch_id
        self._outputs = outputs
        self._backprop = backprop

    def clear(self) -> None:
        self._batch_id = self._outputs = self._backprop = None

    def take_received(self, docs: List[Doc]) -> Tuple[List[Floats3d], LayersBackpropT]:
        """The received outputs for ``docs`` (and forget them)."""
        batch_id = self.get_batch_id(docs)
        if batch_id != self._batch_id:
            raise ValueError(
                f"The ELMo listener received the outputs of another batch ({self._batch_id}, "
                f"expected {batch_id}): the elmo component must be updated with the same "
                f"batch just before"
            )
        outputs, backprop = self._outputs, self._backprop
        self.clear()
        return outputs, backprop


def check_upstream(model: Model, component: str, elmo_components: Sequence[str], components: Sequence[str]) -> None:
    """Refuse an ELMo listener in `model` (`component`'s) whose upstream is none of the
    pipeline's elmo components: nothing would ever feed it."""
    for node in model.walk():
        if isinstance(node, ElmoListener) and node.upstream_name not in ("*", *elmo_components):
            raise SettingsError(
                f"The ELMo listener of {component!r} listens to {node.upstream_name!r}, which is not an elmo "
                f"component of this pipeline (its components: {', '.join(components)}; the elmo ones: "
                f"{', '.join(elmo_components)}); set the listener's upstream to one of those, or \"*\" for any"
            )


def init_listener(model: ElmoListener, X: Optional[List[Doc]] = None, Y=None) -> None:
    sample = None if X is None else (X, zero_layers(model.head, X))
    model.head.initialize(X=sample)
    model.set_dim("nO", model.head.get_dim("nO"))


def listener_forward(
    model: ElmoListener, docs: List[Doc], is_train: bool
) -> Tuple[List[Floats2d], Callable[[List[Floats2d]], List[Doc]]]:
    if is_train and model._batch_id is not None:
        layers, upstream_backprop = model.take_received(docs)
        Y, backprop_head = model.head((docs, layers), is_train)
        grad_factor = model.attrs["grad_factor"]

        def backprop(dY: List[Floats2d]) -> List[Doc]:
            return upstream_backprop(scale_gradients(backprop_head(dY), grad_factor))

        return Y, backprop
    # Prediction, or training while the elmo component is not updated (it is in
    # frozen_components): read what it annotated.
    layers = _doc_layers(model, docs, required=is_train)
    Y, backprop_head = model.head((docs, layers), is_train)

    def backprop_head_only(dY: List[Floats2d]) -> List[Doc]:
        backprop_head(dY)
        return []

    return Y, backprop_head_only


def _doc_layers(model: ElmoListener, docs: List[Doc], *, required: bool) -> List[Floats3d]:
    annotated = [doc_data(doc) for doc in docs]
    missing = [doc for doc, data in zip(docs, annotated) if data is None]
    if missing and required:
        raise SettingsError(
            "An ELMo listener found no doc._.elmo in training: the elmo component was not "
            "updated with this batch. If it is in [training] frozen_components, also add it "
            "to annotating_components (the biLM is frozen by default anyway: the component's "
            "`frozen` setting)"
        )
    zeros = iter(zero_layers(model.head, missing)) if missing else iter(())
    return [next(zeros) if data is None else model.ops.asarray3f(data.layers) for data in annotated]
