"""Small pipelines around the fixture biLM, shared by the spaCy-integration tests."""
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

import spacy
from spacy.language import Language
from spacy.training import Example

from spacy_elmo.models.loaders import build_original_weights_loader_v1

TRAIN_DATA = [
    ("I sat on the bank of the river .", {"tags": ["PRP", "VBD", "IN", "DT", "NN", "IN", "DT", "NN", "."], "pos": ["PRON", "VERB", "ADP", "DET", "NOUN", "ADP", "DET", "NOUN", "PUNCT"]}),
    ("She went to the bank to get money .", {"tags": ["PRP", "VBD", "IN", "DT", "NN", "TO", "VB", "NN", "."], "pos": ["PRON", "VERB", "ADP", "DET", "NOUN", "PART", "VERB", "NOUN", "PUNCT"]}),
    ("They play football .", {"tags": ["PRP", "VBP", "NN", "."], "pos": ["PRON", "VERB", "NOUN", "PUNCT"]}),
    ("We saw a play at the theatre .", {"tags": ["PRP", "VBD", "DT", "NN", "IN", "DT", "NN", "."], "pos": ["PRON", "VERB", "DET", "NOUN", "ADP", "DET", "NOUN", "PUNCT"]}),
    ("Green eggs and ham", {"tags": ["JJ", "NNS", "CC", "NN"], "pos": ["ADJ", "NOUN", "CCONJ", "NOUN"]}),
]

TEXTS = [
    "The bank of the river was muddy.",
    "He robbed a bank in town and ran.",
    "",
    "   ",
    "one",
    "A longer text. It has two sentences, and a comma!",
]


def listener_config(**overrides: Any) -> Dict[str, Any]:
    config: Dict[str, Any] = {
        "@architectures": "spacy-elmo.ElmoListener.v1",
        "mixer": {"@architectures": "spacy-elmo.ScalarMix.v1"},
    }
    config.update(overrides)
    return config


def hash_embed_config(width: int = 16) -> Dict[str, Any]:
    return {
        "@architectures": "spacy.MultiHashEmbed.v2",
        "width": width,
        "attrs": ["NORM", "SHAPE"],
        "rows": [200, 50],
        "include_static_vectors": False,
    }


def tagger_config(tok2vec: Dict[str, Any]) -> Dict[str, Any]:
    return {"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": tok2vec}}


def weights_init_config(weights: Path) -> Dict[str, Any]:
    return {"weights_loader": {"@misc": "spacy-elmo.original_weights.v1", "path": str(weights)}}


def elmo_nlp(
    weights: Optional[Path],
    *,
    frozen: bool = True,
    taggers: Iterable[str] = ("tagger",),
    morphologizer: bool = False,
    listener: Optional[Dict[str, Any]] = None,
    initialize: bool = True,
    elmo_config: Optional[Dict[str, Any]] = None,
) -> Language:
    """A blank English pipeline: elmo, then taggers (and a morphologizer)
    listening to it, initialized on TRAIN_DATA when ``initialize``."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"frozen": frozen, **(elmo_config or {})})
    for name in taggers:
        nlp.add_pipe("tagger", name=name, config=tagger_config(listener or listener_config()))
    if morphologizer:
        morph = {"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": listener or listener_config()}}
        nlp.add_pipe("morphologizer", config=morph)
    if weights is not None:
        nlp.config["initialize"]["components"]["elmo"] = weights_init_config(weights)
    if initialize:
        nlp.initialize(get_examples=lambda: train_examples(nlp))
    return nlp


def train_examples(nlp: Language) -> List[Example]:
    return [Example.from_dict(nlp.make_doc(text), annots) for text, annots in TRAIN_DATA]


def train(nlp: Language, n_steps: int = 10) -> Dict[str, float]:
    optimizer = nlp.create_optimizer()
    examples = train_examples(nlp)
    losses: Dict[str, float] = {}
    for _ in range(n_steps):
        nlp.update(examples, sgd=optimizer, losses=losses)
    return losses


def load_fixture_bilm(weights: Path):
    return build_original_weights_loader_v1(path=weights)()
