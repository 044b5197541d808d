"""ELMoForManyLangs models: the layers its own code computed for two tiny random models
(tests/fixtures/elmoformanylangs, made by make_fixture.py there), and one line for a bad file."""
import json
import os
import pickle
import shutil
from pathlib import Path

import numpy
import pytest
import spacy
import torch

from spacy_elmo.errors import SpacyElmoError, WeightsError
from spacy_elmo.models.loaders import load_model
from spacy_elmo.models.pytorch.elmoformanylangs_format import (
    BOS, CHARACTER_SPECIALS, EOS, OOV, WORD_SPECIALS, DictionaryIds, checked_entries, from_id_order,
)
from spacy_elmo.models.pytorch.elmoformanylangs_format import load as load_elmoformanylangs
from spacy_elmo.models.pytorch.original_format import save_bilm

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "elmoformanylangs"
MODELS = ["char_only", "with_words"]


def expected(name: str) -> dict:
    return json.loads((FIXTURES / name / "expected.json").read_text(encoding="utf8"))


@pytest.mark.parametrize("name", MODELS)
def test_the_layers_are_those_elmoformanylangs_computes(name):
    bilm = load_elmoformanylangs(FIXTURES / name).eval()
    reference = expected(name)
    sentences = reference["sentences"]
    with torch.no_grad():
        together = bilm(bilm.ids_of(sentences)).layers
        for i, sentence in enumerate(sentences):
            theirs = numpy.array(reference["layers"][i], dtype=numpy.float32)
            assert theirs.shape == (3, len(sentence), 16)
            numpy.testing.assert_allclose(together[i, :, : len(sentence)].numpy(), theirs, rtol=0, atol=1e-5)
            alone = bilm(bilm.ids_of([sentence])).layers[0]
            numpy.testing.assert_allclose(alone.numpy(), theirs, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_the_ids_are_those_elmoformanylangs_builds(name):
    """Their ids, +1 (0 marks a padded token); the word id first where there are words."""
    bilm = load_elmoformanylangs(FIXTURES / name)
    reference = expected(name)
    ids = bilm.ids_of(reference["sentences"])
    for i, (sentence, theirs) in enumerate(zip(reference["sentences"], reference["inputs"])):
        rows = numpy.array(theirs["char_ids"]) + 1
        if name == "with_words":
            rows = numpy.concatenate([numpy.array(theirs["word_ids"])[:, None] + 1, rows], axis=1)
        assert (ids[i, : len(sentence)].numpy() == rows[1:-1]).all()
        assert (numpy.array(bilm.token_ids.boundary_rows) == rows[[0, -1]]).all()


def test_a_pipeline_with_an_elmoformanylangs_model_runs_saves_and_loads(tmp_path):
    nlp = spacy.blank("pt")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = {
        "weights_loader": {"@misc": "spacy-elmo.elmo_weights.v1", "model": str(FIXTURES / "with_words")}
    }
    nlp.initialize()
    sentence = expected("with_words")["sentences"][0]
    doc = nlp(spacy.tokens.Doc(nlp.vocab, words=sentence))
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    again = loaded(spacy.tokens.Doc(loaded.vocab, words=sentence))
    numpy.testing.assert_array_equal(doc.tensor, again.tensor)
    mean = numpy.array(expected("with_words")["layers"][0]).mean(axis=0)
    numpy.testing.assert_allclose(doc.tensor, mean, rtol=0, atol=1e-5)


def test_embed_reads_an_elmoformanylangs_folder(tmp_path, capsys, monkeypatch):
    from tests.cli.test_embed import read_output, run_embed, write_lines

    reference = expected("char_only")
    input_path = write_lines(tmp_path / "in.txt", [" ".join(s) for s in reference["sentences"][2:4]])
    code, out, err = run_embed(capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", str(FIXTURES / "char_only"))
    assert code == 0, out + err
    arrays, _ = read_output(tmp_path / "out.hdf5")
    for array, layers in zip(arrays, reference["layers"][2:4]):
        numpy.testing.assert_allclose(array, numpy.array(layers), rtol=0, atol=1e-5)


def test_it_cannot_be_written_in_the_bilm_tf_format(tmp_path):
    with pytest.raises(SpacyElmoError, match="character vocabulary .*bilm-tf format cannot hold it"):
        save_bilm(load_elmoformanylangs(FIXTURES / "char_only"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _edit_json(name):
    def edit(folder: Path, change) -> None:
        path = folder / name
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))
    return edit


def _model_config(change):
    return lambda folder: _edit_json("cnn_6_5_8_16_sample.json")(folder, change)


def _state(file, change):
    def edit(folder: Path) -> None:
        state = torch.load(folder / file, weights_only=True)
        change(state)
        torch.save(state, folder / file)
    return edit


class Exploit:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


HOSTILE = [
    ("config.json not JSON", lambda f: (f / "config.json").write_text("{"), "config.json: not valid JSON"),
    ("no config_path", lambda f: _edit_json("config.json")(f, lambda d: d.pop("config_path")),
     "no config_path"),
    ("model config elsewhere", lambda f: (f / "cnn_6_5_8_16_sample.json").unlink(),
     "the model config cnn_6_5_8_16_sample.json is not in"),
    ("a plain LSTM encoder", _model_config(lambda d: d["encoder"].update(name="lstm")),
     "encoder.name must be 'elmo'"),
    ("NaN clip", _model_config(lambda d: d["encoder"].update(cell_clip=float("nan"))),
     "encoder.cell_clip must be a finite number"),
    ("a size bomb", _model_config(lambda d: d["encoder"].update(dim=10**7)),
     "more than the 400,000,000 spacy-elmo loads"),
    ("a bad char.dic line", lambda f: (f / "char.dic").write_text("a\t0\nb\tx\n", encoding="utf8"),
     "char.dic, line 2: expected an entry, a tab and its id"),
    ("char.dic without <pad>", lambda f: (f / "char.dic").write_text(
        "".join(line for line in (f / "char.dic").read_text(encoding="utf8").splitlines(True) if "<pad>" not in line),
        encoding="utf8"), "char.dic: lacks the entries <pad>"),
    ("an id past the end", lambda f: (f / "word.dic").write_text(
        (f / "word.dic").read_text(encoding="utf8") + "zzz\t999\n", encoding="utf8"), r"word.dic, line 32: id 999 is not below the number of entries \(32\)"),
    ("a wrong shape", _state("encoder.pkl", lambda s: s.update({"forward_layer_0.state_projection.weight": torch.zeros(8, 3)})),
     r"encoder.pkl: 'forward_layer_0.state_projection.weight' has shape \(8, 3\), but its settings say \(8, 16\)"),
    ("a missing tensor", _state("token_embedder.pkl", lambda s: s.pop("projection.bias")),
     r"its settings and weights disagree \(missing \['projection.bias'\]"),
    ("a NaN weight", _state("encoder.pkl", lambda s: s["backward_layer_1.state_linearity.bias"].fill_(float("nan"))),
     "'backward_layer_1.state_linearity.bias' holds values that are not finite"),
    ("code in the pickle", lambda f: (f / "encoder.pkl").write_bytes(pickle.dumps(Exploit(), protocol=2)),
     "encoder.pkl: the weights cannot be read safely"),
    ("a FIFO as char.dic", lambda f: ((f / "char.dic").unlink(), os.mkfifo(f / "char.dic")),
     r"Vocabulary path .*char.dic is a FIFO \(named pipe\), not a regular file"),
]


@pytest.mark.parametrize("name,damage,message", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_bad_file_gets_one_line(tmp_path, monkeypatch, name, damage, message):
    folder = tmp_path / "model"
    shutil.copytree(FIXTURES / "with_words", folder)
    monkeypatch.chdir(tmp_path)
    damage(folder)
    with pytest.raises(SpacyElmoError, match=message) as caught:
        load_model(folder)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("field,value,message", [
    ("n_layers", 10**9, "encoder.n_layers must be at most 64, got 1000000000"),
    ("lstm_dim", 10**7, "more than the 400,000,000 spacy-elmo loads"),
    ("filters", "wide", "token_embedder.filters must be a list, got 'wide'"),
])
def test_a_saved_pipelines_description_is_checked_before_a_model_is_built(field, value, message):
    from spacy_elmo.models.pytorch.elmoformanylangs_format import DESCRIPTION_KEY, describe, rebuild

    saved = describe(load_elmoformanylangs(FIXTURES / "char_only"))
    assert isinstance(rebuild(saved), type(load_elmoformanylangs(FIXTURES / "char_only")))
    saved[DESCRIPTION_KEY]["options"][field] = value
    with pytest.raises(SpacyElmoError, match=message):
        rebuild(saved)


def test_listeners_train_over_an_elmoformanylangs_model_and_fine_tuning_reaches_its_word_embedding():
    from spacy_elmo.models.bilm_layer import get_bilm
    from tests.pipeline.util import elmo_nlp, train, train_examples

    nlp = elmo_nlp(None, frozen=False, initialize=False)
    nlp.config["initialize"]["components"]["elmo"] = {
        "weights_loader": {"@misc": "spacy-elmo.elmo_weights.v1", "model": str(FIXTURES / "with_words")}
    }
    nlp.initialize(get_examples=lambda: train_examples(nlp))
    encoder = get_bilm(nlp.get_pipe("elmo").model).char_encoder
    words, chars = encoder.word_embedding.detach().clone(), encoder.char_embedding.detach().clone()
    losses = train(nlp, 3)
    assert losses["elmo"] > 0.0 and losses["tagger"] > 0.0
    assert not torch.equal(words, encoder.word_embedding) and not torch.equal(chars, encoder.char_embedding)


def test_embed_says_one_line_for_a_damaged_elmoformanylangs_folder(tmp_path, capsys, monkeypatch):
    from tests.cli.test_embed import one_message, run_embed, write_lines

    folder = tmp_path / "model"
    shutil.copytree(FIXTURES / "char_only", folder)
    (folder / "char.dic").write_text("a\t0\nb\tx\n", encoding="utf8")
    code, out, err = run_embed(capsys, monkeypatch, write_lines(tmp_path / "in.txt", ["Olá mundo"]), tmp_path / "out.hdf5",
                               "--weights", str(folder))
    assert code == 1 and not (tmp_path / "out.hdf5").exists()
    assert one_message(out + err).startswith("✘ ") and "char.dic, line 2: expected an entry, a tab and its id" in out + err
    assert "Traceback" not in out + err


# Token ids: the word's id, then <eow>, the characters, <bow>, padding, all +1.
CHARACTERS = {c: i for i, c in enumerate(CHARACTER_SPECIALS + tuple("abc"))}
WORDS = {w: i for i, w in enumerate(WORD_SPECIALS + ("ab",))}


def test_a_tokens_row_is_its_word_then_eow_characters_bow_and_padding_shifted_by_one():
    ids = DictionaryIds(CHARACTERS, WORDS, max_chars=6)
    eow, bow, pad, oov = (CHARACTERS[k] + 1 for k in ("<eow>", "<bow>", "<pad>", OOV))
    assert ids.row("ab") == (WORDS["ab"] + 1, eow, CHARACTERS["a"] + 1, CHARACTERS["b"] + 1, bow, pad, pad)
    assert ids.row("zz") == (WORDS[OOV] + 1, eow, oov, oov, bow, pad, pad)  # unknown word and characters
    a, b, c = (CHARACTERS[k] + 1 for k in "abc")
    assert ids.row("abcabc")[1:] == (eow, a, b, c, a, bow)  # cut to max_chars - 2 characters
    wide = DictionaryIds(CHARACTERS, WORDS, max_chars=8)
    assert wide.row(BOS)[1:4] == (eow, CHARACTERS[BOS] + 1, bow)  # a boundary is one character of its name
    assert wide.boundary_rows == (wide.row(BOS), wide.row(EOS)) and ids.pad_id == pad


def test_rows_are_each_words_row_and_no_words_give_one_column_less():
    for words in (WORDS, None):
        ids = DictionaryIds(CHARACTERS, words, max_chars=6)
        tokens = ["ab", "zz", "", "abcabc", BOS]
        rows = ids.rows(tokens)
        assert [tuple(row) for row in rows.tolist()] == [ids.row(t) for t in tokens]
        assert rows.shape == (5, ids.word_columns + 6) and ids.rows([]).shape == (0, ids.word_columns + 6)


def test_entries_are_checked_and_read_back_in_id_order():
    with pytest.raises(WeightsError, match="word.dic, line 3: id 0 is also the id of line 1"):
        checked_entries([(1, BOS, 0), (2, EOS, 1), (3, OOV, 0)], WORD_SPECIALS, "word.dic", "line")
    with pytest.raises(WeightsError, match="word.dic: lacks the entries <oov>"):
        checked_entries([(1, BOS, 0), (2, EOS, 1)], WORD_SPECIALS, "word.dic", "line")
    with pytest.raises(WeightsError, match=r"word.dic, line 3: id 7 is not below the number of entries \(3\)"):
        checked_entries([(1, BOS, 0), (2, EOS, 1), (3, OOV, 7)], WORD_SPECIALS, "word.dic", "line")
    saved = DictionaryIds(CHARACTERS, WORDS, max_chars=6).to_dict()
    assert from_id_order(saved["words"], WORD_SPECIALS, "saved") == WORDS
    with pytest.raises(WeightsError, match="saved: not a list of entries"):
        from_id_order([1, 2], WORD_SPECIALS, "saved")
