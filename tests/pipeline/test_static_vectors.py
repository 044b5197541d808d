"""Static vectors by name or path in ``[initialize.before_init]``."""
from pathlib import Path

import numpy
import pytest
import spacy
from spacy import registry
from spacy.vectors import Vectors

from spacy_elmo.errors import InputError
from spacy_elmo.named_models import RESOURCES, locate_vectors

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _floret_vectors_dir(path: Path) -> Path:
    """A spaCy vectors directory as `spacy init vectors --mode floret` writes one."""
    nlp = spacy.blank("en")
    table = numpy.random.default_rng(0).normal(size=(64, 8)).astype("float32")
    nlp.vocab.vectors = Vectors(data=table, mode="floret", minn=2, maxn=3, hash_count=2)
    nlp.to_disk(path)
    return path


def test_the_callback_loads_a_vectors_directory_before_the_components_initialize(tmp_path):
    source = spacy.load(_floret_vectors_dir(tmp_path / "vectors"))
    load = registry.callbacks.get("spacy-elmo.static_vectors.v1")(vectors=str(tmp_path / "vectors"))
    nlp = spacy.blank("en")
    assert load(nlp) is nlp
    assert nlp.vocab.vectors.mode == "floret" and nlp.vocab.vectors.shape == (64, 8)
    for word in ("river", "unseenword"):
        numpy.testing.assert_array_equal(nlp.vocab[word].vector, source.vocab[word].vector)
        assert numpy.abs(nlp.vocab[word].vector).sum() > 0


def test_a_path_wins_over_a_name_and_an_unknown_name_lists_the_shipped_vectors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _floret_vectors_dir(tmp_path / "english-compact")
    assert locate_vectors("english-compact") == Path("english-compact")
    with pytest.raises(InputError, match=r"Vectors not found: nope \(no such directory, and not the name of "
                       r"shipped vectors: english-compact\)"):
        registry.callbacks.get("spacy-elmo.static_vectors.v1")(vectors="nope")


def test_the_shipped_english_vectors_load_by_name_offline():
    directory = locate_vectors("english-compact")
    assert directory == RESOURCES / "english_compact" / "vectors"
    nlp = spacy.blank("en")
    registry.callbacks.get("spacy-elmo.static_vectors.v1")(vectors="english-compact")(nlp)
    vectors = nlp.vocab.vectors
    assert vectors.mode == "floret" and vectors.shape[0] * vectors.shape[1] * 4 <= 20_000_000
    similar, other = (nlp.vocab[word].vector for word in ("Tuesday", "carbon"))
    tuesday = nlp.vocab["Monday"].vector
    cosine = lambda a, b: float(a @ b / numpy.linalg.norm(a) / numpy.linalg.norm(b))  # noqa: E731
    assert cosine(tuesday, similar) > cosine(tuesday, other) + 0.2


def test_no_vectors_means_the_languages_shipped_ones_and_other_languages_are_told_what_to_do():
    loader = registry.callbacks.get("spacy-elmo.static_vectors.v1")
    nlp = loader(vectors=None, lang="en")(spacy.blank("en"))
    assert nlp.vocab.vectors.shape == spacy.load(locate_vectors("english-compact")).vocab.vectors.shape
    with pytest.raises(InputError, match="ships no static vectors for language 'fr'.*paths.vectors"):
        loader(vectors=None, lang="fr")


@pytest.mark.slow
def test_the_vectors_configs_initialize_with_the_shipped_vectors_or_a_given_directory(tmp_path):
    from spacy.util import load_config, load_model_from_config

    for name in ("ner_vectors.cfg", "ud_vectors.cfg"):
        for vectors, shape in ((None, (48_000, 100)), (str(_floret_vectors_dir(tmp_path / name)), (64, 8))):
            config = load_config(CONFIGS / name, overrides={"paths.vectors": vectors})
            nlp = load_model_from_config(config, auto_fill=True, validate=True)
            with nlp.select_pipes(disable=nlp.pipe_names):  # the vocab only: no labels needed
                nlp.initialize()
            assert nlp.vocab.vectors.mode == "floret" and nlp.vocab.vectors.shape == shape, (name, vectors)
