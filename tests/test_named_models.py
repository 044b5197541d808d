"""Models by name: the shipped English and Portuguese biLMs, names vs paths, the default per language."""
import json
import re
from pathlib import Path

import pytest

from spacy_elmo.errors import InputError
from spacy_elmo.models.loaders import find_model, load_named_weights
from spacy_elmo.models.pytorch.original_format import load_bilm
from spacy_elmo.named_models import DEFAULT_MODELS, NAMED_MODELS, default_model


ROOT = Path(__file__).resolve().parents[1]
SHIPPED = [
    ("english-compact", "en", ROOT / "spacy_elmo" / "resources" / "english_compact",
     ("Wikipedia", "Stack Exchange", "CC BY-SA", "Project Gutenberg")),
    ("portuguese-compact", "pt", ROOT / "models" / "portuguese-compact" / "spacy_elmo_portuguese_compact",
     ("UD Portuguese-Bosque", "LeNER-Br", "CC BY-SA", "ELTeC")),
]


@pytest.mark.parametrize("name,lang,folder,credits", SHIPPED, ids=[s[0] for s in SHIPPED])
def test_each_shipped_model_is_in_its_package_and_loads_offline(monkeypatch, name, lang, folder, credits):
    """english-compact in spacy-elmo; portuguese-compact in its own package, found in this checkout."""
    monkeypatch.setenv("SPACY_ELMO_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    weights, options = find_model(name)
    assert options.parent == weights.parent == folder
    bilm = load_named_weights(None, lang=lang)
    card = (weights.parent / "MODEL_CARD.md").read_text(encoding="utf8")
    assert json.loads(options.read_text())["lstm"]["projection_dim"] * 2 == bilm.output_dim
    for credit in credits:
        assert credit in card
    assert "## Perplexity" in card and re.search(r"held-out[^\n]*\| \*\*\d+\.\d+\*\* \|", card)
    assert weights.stat().st_size < 40_000_000
    layers = bilm(bilm.ids_of([["Olá", ",", "mundo", "!"]])).layers
    assert layers.shape == (1, 3, 4, bilm.output_dim) and bool(layers.isfinite().all())


def test_english_and_portuguese_default_to_the_shipped_models_and_other_languages_are_told_what_to_do():
    assert default_model("en") == "english-compact" and NAMED_MODELS[DEFAULT_MODELS["en"]].shipped
    assert default_model("pt") == "portuguese-compact" and NAMED_MODELS[DEFAULT_MODELS["pt"]].shipped
    with pytest.raises(InputError, match="ships no biLM for language 'fr'.*spacy_elmo pretrain"):
        default_model("fr")


def test_a_path_wins_over_a_name_and_an_unknown_name_lists_the_known_ones(tmp_path, allennlp_model_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "small").symlink_to(allennlp_model_dir)
    assert find_model("small") == (Path("small"), None)
    with pytest.raises(InputError, match="Weights file not found: nope .no such file or directory, and not an "
                       r"ELMo model name: english-compact, portuguese-compact, small, medium, original, original-5.5b, pubmed, portuguese-wikipedia, "
                       r"portuguese-brwac, german-tsystems, elmoformanylangs-LANG \(LANG: ar bg .* vi zh\)\)"):
        find_model("nope")


def test_the_config_loader_takes_a_name_a_path_or_nothing(allennlp_model_dir):
    from spacy import registry

    loader = registry.misc.get("spacy-elmo.elmo_weights.v1")
    by_path = loader(model=str(allennlp_model_dir))()
    reference = load_bilm(allennlp_model_dir)
    assert by_path.options == reference.options
    assert loader(model=None, lang="en")().options == load_named_weights("english-compact").options
    with pytest.raises(InputError, match="language 'nl'"):
        loader(model=None, lang="nl")()


def test_ud_and_ner_elmo_configs_use_the_shipped_model_when_no_model_is_given():
    from spacy import registry
    from spacy.util import load_config

    shipped = load_named_weights("english-compact")
    configs = Path(__file__).resolve().parents[1] / "configs"
    for name in ("ud_elmo.cfg", "ner_elmo.cfg"):
        config = load_config(configs / name, interpolate=True)
        loader = config["initialize"]["components"]["elmo"]["weights_loader"]
        assert loader["model"] is None and loader["lang"] == "en"
        bilm = registry.resolve({"loader": loader})["loader"]()
        assert bilm.options == shipped.options
