"""Every registered name resolves through spaCy's registries (entry points)."""
import pytest
from spacy import registry
from spacy.language import Language

ARCHITECTURES = [
    "spacy-elmo.ElmoBiLM.v1",
    "spacy-elmo.ScalarMix.v1",
    "spacy-elmo.ElmoListener.v1",
    "spacy-elmo.Tok2VecElmo.v1",
]
MISC = ["spacy-elmo.sentence_spans.v1", "spacy-elmo.doc_spans.v1", "spacy-elmo.original_weights.v1"]


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_architectures(name):
    assert callable(registry.architectures.get(name))


@pytest.mark.parametrize("name", MISC)
def test_misc(name):
    assert callable(registry.misc.get(name))


def test_factory():
    assert Language.has_factory("elmo")
    meta = Language.get_factory_meta("elmo")
    assert meta.default_config["frozen"] is True
    assert "doc._.elmo" in meta.assigns and "doc.tensor" in meta.assigns
