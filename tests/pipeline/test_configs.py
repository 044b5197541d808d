"""The shipped configs: complete, ELMo = baseline + ELMo features, and they train."""
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.util import load_config, load_model_from_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
PAIRS = [
    ("ud_baseline.cfg", "ud_elmo.cfg"), ("ner_baseline.cfg", "ner_elmo.cfg"),
    ("ud_vectors.cfg", "ud_elmo_vectors.cfg"), ("ner_vectors.cfg", "ner_elmo_vectors.cfg"),
]
# Each vectors config and the config it adds static vectors to.
WITH_VECTORS = [
    ("ud_baseline.cfg", "ud_vectors.cfg"), ("ud_elmo.cfg", "ud_elmo_vectors.cfg"),
    ("ner_baseline.cfg", "ner_vectors.cfg"), ("ner_elmo.cfg", "ner_elmo_vectors.cfg"),
]


@pytest.mark.parametrize("name", [name for pair in PAIRS for name in pair])
def test_config_is_complete_and_builds(name):
    config = load_config(CONFIGS / name)
    nlp = load_model_from_config(config, auto_fill=False, validate=True)
    assert nlp.pipe_names == config["nlp"]["pipeline"]
    assert config["corpora"]["train"]["path"] == "${paths.train}"
    assert config["corpora"]["dev"]["path"] == "${paths.dev}"


@pytest.mark.parametrize("baseline_name,elmo_name", PAIRS)
def test_elmo_config_is_the_baseline_plus_elmo(baseline_name, elmo_name):
    baseline = load_config(CONFIGS / baseline_name, interpolate=False)
    elmo = load_config(CONFIGS / elmo_name, interpolate=False)
    for section in ("training", "corpora", "system"):
        assert elmo[section] == baseline[section], section
    assert elmo["nlp"]["pipeline"] == ["elmo"] + baseline["nlp"]["pipeline"]
    assert elmo["paths"]["elmo_model"] is None
    loader = elmo["initialize"]["components"]["elmo"]["weights_loader"]
    assert loader["@misc"] == "spacy-elmo.elmo_weights.v1" and loader["model"] == "${paths.elmo_model}"
    assert loader["lang"] == "${nlp.lang}"
    n_listeners = 0
    for name, component in elmo["components"].items():
        if name == "elmo":
            continue
        expected = baseline["components"][name]
        n_listeners += _unwrap_elmo_listeners(component, expected)
        assert component == expected, name
    assert n_listeners > 0


@pytest.mark.parametrize("plain_name,vectors_name", WITH_VECTORS)
def test_vectors_config_is_its_config_plus_static_vectors(plain_name, vectors_name):
    plain = load_config(CONFIGS / plain_name, interpolate=False)
    with_vectors = load_config(CONFIGS / vectors_name, interpolate=False)
    # spaCy's [initialize] vectors takes a path; the callback also the shipped vectors.
    assert with_vectors["initialize"]["vectors"] is None
    assert with_vectors["initialize"]["before_init"] == {
        "@callbacks": "spacy-elmo.static_vectors.v1", "vectors": "${paths.vectors}", "lang": "${nlp.lang}",
    }
    assert plain["initialize"]["vectors"] == "${paths.vectors}" and plain["initialize"]["before_init"] is None
    with_vectors["initialize"].update(vectors="${paths.vectors}", before_init=None)
    switches = _static_vector_switches(with_vectors)
    assert switches == ["components.tok2vec.model.embed" + ("" if "elmo" not in plain_name else ".token_embedding")]
    for path in switches:
        section = with_vectors
        for key in path.split("."):
            section = section[key]
        assert section["include_static_vectors"] is True
        section["include_static_vectors"] = False
    assert with_vectors == plain


def _static_vector_switches(config: dict, prefix: str = "") -> list:
    """The dotted paths of the sections that set include_static_vectors = true."""
    found = [prefix.rstrip(".")] if config.get("include_static_vectors") is True else []
    for key, value in config.items():
        if isinstance(value, dict):
            found += _static_vector_switches(value, f"{prefix}{key}.")
    return found


def _unwrap_elmo_listeners(elmo_section: dict, baseline_section: dict) -> int:
    """Put back the baseline's layer that each ELMo listener in ``elmo_section``
    wraps as its token embedding (``[x_k; ELMo_k]``); return how many it found."""
    found = 0
    for key, value in elmo_section.items():
        if not isinstance(value, dict) or not isinstance(baseline_section.get(key), dict):
            continue
        if value.get("@architectures") == "spacy-elmo.ElmoListener.v1":
            assert value["upstream"] == "elmo"
            assert value["mixer"]["@architectures"] == "spacy-elmo.ScalarMix.v1"
            assert value["token_embedding"] == baseline_section[key], key
            elmo_section[key] = value["token_embedding"]
            found += 1
        else:
            found += _unwrap_elmo_listeners(value, baseline_section[key])
    return found


def _head_conllu(source: Path, target: Path, n_sentences: int) -> None:
    blocks = source.read_text(encoding="utf8").split("\n\n")[:n_sentences]
    target.write_text("\n\n".join(blocks) + "\n\n", encoding="utf8")


def _run(*args: str) -> str:
    result = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_spacy_train_end_to_end_on_ewt(data_dir, allennlp_model_dir, tmp_path):
    """`python -m spacy train configs/ud_elmo.cfg` on a few hundred EWT
    sentences converted with `spacy convert`, with the fixture biLM."""
    ewt = data_dir / "ud_english_ewt"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _head_conllu(ewt / "en_ewt-ud-train.conllu", tmp_path / "train.conllu", 300)
    _head_conllu(ewt / "en_ewt-ud-dev.conllu", tmp_path / "dev.conllu", 100)
    for split in ("train", "dev"):
        _run("-m", "spacy", "convert", str(tmp_path / f"{split}.conllu"), str(corpus),
             "--converter", "conllu", "--n-sents", "10")
    output = tmp_path / "training"
    _run(
        "-m", "spacy", "train", str(CONFIGS / "ud_elmo.cfg"), "--output", str(output),
        "--paths.train", str(corpus / "train.spacy"), "--paths.dev", str(corpus / "dev.spacy"),
        "--paths.elmo_model", str(allennlp_model_dir / "lm_weights.hdf5"),
        "--training.max_steps", "24", "--training.eval_frequency", "12",
    )
    nlp = spacy.load(output / "model-best")
    assert nlp.pipe_names == ["elmo", "tok2vec", "tagger", "morphologizer", "parser"]
    performance = nlp.meta["performance"]
    assert performance["tag_acc"] > 0.1 and performance["pos_acc"] > 0.1
    assert performance["dep_uas"] > 0.0
    doc = nlp("The bank of the river was muddy.")
    assert doc._.elmo.layers.shape == (3, len(doc), 32)
    assert all(token.tag_ and token.pos_ and token.dep_ for token in doc)
    table = _run("-m", "spacy_elmo", "inspect", str(output / "model-best"))
    assert all(name in table for name in ("tagger", "morphologizer", "parser", "gamma"))
