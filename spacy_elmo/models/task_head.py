"""The per-task head: a task's own scalar mix, optionally ``[x_k; ELMo_k]`` with a token embedding, and a projection.

Shared by the listener and the inline ``Tok2VecElmo``, so both compute the same token features from the same weights.
"""
from typing import Any, Callable, List, Optional, Tuple

from spacy.tokens import Doc
from thinc.api import Maxout, Model, with_array
from thinc.types import Floats2d, Floats3d

from ..errors import SettingsError
from .scalar_mix_layer import set_mix_dims
from .types import TaskHeadInT, TaskHeadModelT, ScalarMixModelT, Tok2VecModelT


def build_task_head(
    *,
    mixer: ScalarMixModelT,
    token_embedding: Optional[Tok2VecModelT] = None,
    width: Optional[int] = None,
) -> TaskHeadModelT:
    """``[x_k; ELMo_k]``: the token embedding's vectors (if any) and the mix,
    concatenated, then projected to ``width`` by a layer-normalised maxout (if
    given). Output width: ``width``, or the embedding's plus the biLM's."""
    layers: List[Model] = [mixer]
    refs = {"mixer": mixer, "token_embedding": token_embedding, "projection": None}
    if token_embedding is not None:
        layers.append(token_embedding)
    if width is not None:
        projection = with_array(Maxout(nO=width, nP=3, normalize=True))
        refs["projection"] = projection
        layers.append(projection)
    return Model(
        "elmo_task_head",
        task_head_forward,
        init=init_task_head,
        dims={"nO": width},
        layers=layers,
        refs=refs,
    )


def set_task_head_dims(model: TaskHeadModelT, n_layers: int, width: int) -> None:
    """Size the head for a biLM with ``n_layers`` layers of ``width``."""
    set_mix_dims(model.get_ref("mixer"), n_layers, width)
    embedding_width = _embedding_width(model)
    if embedding_width is None:
        return  # known after the embedding is initialized
    if model.maybe_get_ref("projection") is None:
        model.set_dim("nO", width + embedding_width)


def zero_layers(model: TaskHeadModelT, docs: List[Doc]) -> List[Floats3d]:
    """Placeholder layers for Docs that have none (before the biLM ran)."""
    mixer = model.get_ref("mixer")
    n_layers, width = mixer.maybe_get_dim("nL"), mixer.maybe_get_dim("nO")
    if n_layers is None or width is None:
        raise SettingsError(
            "This ELMo listener does not know its biLM's size yet: put the elmo component "
            "before the components that listen to it and initialize it first (with its "
            "weights_loader), or load a trained pipeline"
        )
    return [model.ops.alloc3f(n_layers, len(doc), width) for doc in docs]


def init_task_head(
    model: TaskHeadModelT, X: Optional[TaskHeadInT] = None, Y: Any = None
) -> None:
    docs, layers = X if X is not None else (None, None)
    mixer = model.get_ref("mixer")
    mixer.initialize(X=layers)
    token_embedding = model.maybe_get_ref("token_embedding")
    if token_embedding is not None:
        token_embedding.initialize(X=docs)
        if not token_embedding.has_dim("nO"):
            if not docs:
                raise SettingsError("The width of the ELMo listener's token embedding is unknown")
            token_embedding.set_dim("nO", token_embedding.predict(docs[:1])[0].shape[1])
    set_task_head_dims(model, mixer.get_dim("nL"), mixer.get_dim("nO"))
    projection = model.maybe_get_ref("projection")
    if projection is not None:
        concatenated = mixer.get_dim("nO") + _embedding_width(model)
        projection.initialize(X=[model.ops.alloc2f(1, concatenated)])


def task_head_forward(
    model: TaskHeadModelT, X: TaskHeadInT, is_train: bool
) -> Tuple[List[Floats2d], Callable[[List[Floats2d]], List[Floats3d]]]:
    docs, layers = X
    mixer = model.get_ref("mixer")
    token_embedding = model.maybe_get_ref("token_embedding")
    projection = model.maybe_get_ref("projection")
    Y, backprop_mix = mixer(layers, is_train)
    if token_embedding is not None:
        embedded, backprop_embedding = token_embedding(docs, is_train)
        split = token_embedding.get_dim("nO")
        Y = [model.ops.xp.hstack((e, m)) for e, m in zip(embedded, Y)]
    if projection is not None:
        Y, backprop_projection = projection(Y, is_train)

    def backprop(dY: List[Floats2d]) -> List[Floats3d]:
        if projection is not None:
            dY = backprop_projection(dY)
        if token_embedding is not None:
            backprop_embedding([model.ops.xp.ascontiguousarray(d[:, :split]) for d in dY])
            dY = [model.ops.xp.ascontiguousarray(d[:, split:]) for d in dY]
        return backprop_mix(dY)

    return Y, backprop


def _embedding_width(model: TaskHeadModelT) -> Optional[int]:
    token_embedding = model.maybe_get_ref("token_embedding")
    return 0 if token_embedding is None else token_embedding.maybe_get_dim("nO")
