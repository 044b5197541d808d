"""Every registered name resolves through spaCy's registries (entry points) to its builder."""
import pytest
from spacy import registry
from spacy.language import Language

from spacy_elmo.models.bilm_layer import build_bilm_layer_v1
from spacy_elmo.models.tok2vec_elmo import build_tok2vec_elmo_v1
from spacy_elmo.models.listener import build_elmo_listener_v1
from spacy_elmo.models.loaders import build_elmo_weights_loader_v1, build_original_weights_loader_v1
from spacy_elmo.models.scalar_mix_layer import build_scalar_mix_v1
from spacy_elmo.models.spans import build_doc_spans_v1, build_sentence_spans_v1, build_sentence_spans_v2
from spacy_elmo.pipeline.elmo import make_elmo
from spacy_elmo.pipeline.static_vectors import create_static_vectors_loader_v1

ARCHITECTURES = {
    "spacy-elmo.ElmoBiLM.v1": build_bilm_layer_v1,
    "spacy-elmo.ScalarMix.v1": build_scalar_mix_v1,
    "spacy-elmo.ElmoListener.v1": build_elmo_listener_v1,
    "spacy-elmo.Tok2VecElmo.v1": build_tok2vec_elmo_v1,
}
MISC = {
    "spacy-elmo.sentence_spans.v1": build_sentence_spans_v1,
    "spacy-elmo.sentence_spans.v2": build_sentence_spans_v2,
    "spacy-elmo.doc_spans.v1": build_doc_spans_v1,
    "spacy-elmo.original_weights.v1": build_original_weights_loader_v1,
    "spacy-elmo.elmo_weights.v1": build_elmo_weights_loader_v1,
}


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_architectures(name):
    assert registry.architectures.get(name) is ARCHITECTURES[name]


@pytest.mark.parametrize("name", MISC)
def test_misc(name):
    assert registry.misc.get(name) is MISC[name]


def test_callbacks():
    assert registry.callbacks.get("spacy-elmo.static_vectors.v1") is create_static_vectors_loader_v1


def test_factory():
    assert Language.has_factory("elmo")
    assert registry.factories.get("elmo") is make_elmo
    meta = Language.get_factory_meta("elmo")
    assert meta.default_config["frozen"] is True
    assert "doc._.elmo" in meta.assigns and "doc.tensor" in meta.assigns
