"""``Tok2VecElmo``: a biLM and a task head inside one component.

What ``nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])`` puts in place of a listener: a copy of the elmo
component's biLM and the listener's own task head (its trained mix kept), so the component stands alone.
"""
from typing import Any, Callable, Dict, List, Optional, Tuple

from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d

from .task_head import build_task_head, set_task_head_dims
from .gradients import check_grad_factor, scale_gradients
from .types import BiLMModelT, ScalarMixModelT, TaskHeadModelT, Tok2VecModelT


def build_tok2vec_elmo_v1(
    *,
    bilm: BiLMModelT,
    mixer: ScalarMixModelT,
    token_embedding: Optional[Tok2VecModelT] = None,
    width: Optional[int] = None,
    frozen: bool = True,
    grad_factor: float = 1.0,
) -> Tok2VecModelT:
    """A biLM with this component's own mix (the inline form of the listener).

    bilm (Model): ``spacy-elmo.ElmoBiLM.v1``; a fresh pipeline needs its
        ``weights_loader`` (or ``size``) set, as no elmo component loads it.
    frozen (bool): keep the biLM's weights fixed.
    mixer, token_embedding, width, grad_factor: as for ``spacy-elmo.ElmoListener.v1``.
    """
    head = build_task_head(mixer=mixer, token_embedding=token_embedding, width=width)
    return tok2vec_elmo(bilm, head, frozen=frozen, grad_factor=check_grad_factor(grad_factor))


def tok2vec_elmo(
    bilm: BiLMModelT, head: TaskHeadModelT, *, frozen: bool, grad_factor: float
) -> Tok2VecModelT:
    if bilm.has_dim("nL"):
        set_task_head_dims(head, bilm.get_dim("nL"), bilm.get_dim("nO"))
    return Model(
        "tok2vec_elmo",
        tok2vec_elmo_forward,
        init=init_tok2vec_elmo,
        dims={"nO": head.maybe_get_dim("nO")},
        layers=[bilm, head],
        attrs={"frozen": frozen, "grad_factor": grad_factor},
    )


def init_tok2vec_elmo(model: Tok2VecModelT, X: Optional[List[Doc]] = None, Y: Any = None) -> None:
    bilm, head = model.layers
    bilm.initialize(X=X)
    set_task_head_dims(head, bilm.get_dim("nL"), bilm.get_dim("nO"))
    head.initialize(X=None if X is None else (X, bilm.predict(X)))
    model.set_dim("nO", head.get_dim("nO"))


def tok2vec_elmo_forward(
    model: Tok2VecModelT, docs: List[Doc], is_train: bool
) -> Tuple[List[Floats2d], Callable[[List[Floats2d]], List[Doc]]]:
    bilm, head = model.layers
    fine_tune = is_train and not model.attrs["frozen"]
    if fine_tune:
        layers, backprop_bilm = bilm(docs, is_train)
    else:
        layers = bilm.predict(docs)
    Y, backprop_head = head((docs, layers), is_train)
    grad_factor = model.attrs["grad_factor"]

    def backprop(dY: List[Floats2d]) -> List[Doc]:
        d_layers = backprop_head(dY)
        if fine_tune:
            backprop_bilm(scale_gradients(d_layers, grad_factor))
        return []

    return Y, backprop


def replace_listener(bilm_copy: BiLMModelT, listener: Model, elmo_pipe: Any) -> Tok2VecModelT:
    """``Language.replace_listeners`` callback (the biLM attr ``replace_listener``):
    the listener's task head moves into the new model, with its trained mix."""
    return tok2vec_elmo(
        bilm_copy,
        listener.layers[0],
        frozen=elmo_pipe.frozen,
        grad_factor=listener.attrs["grad_factor"],
    )


def replace_listener_cfg(
    bilm_cfg: Dict[str, Any], listener_cfg: Dict[str, Any], *, frozen: bool
) -> Dict[str, Any]:
    """The config of what :func:`replace_listener` builds (bound to the elmo
    component's ``frozen`` as the biLM attr ``replace_listener_cfg``)."""
    result = {"@architectures": "spacy-elmo.Tok2VecElmo.v1", "bilm": bilm_cfg, "frozen": frozen}
    for key in ("mixer", "token_embedding", "width", "grad_factor"):
        if key in listener_cfg:
            result[key] = listener_cfg[key]
    return result
