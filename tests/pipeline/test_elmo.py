"""The elmo component in a pipeline: annotations, edge cases, batching, processes."""
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import spacy
import torch
from spacy.language import Language
from spacy.tokens import Doc, DocBin

from spacy_elmo.doc_data import ElmoDocData, restore_vector_hooks
from spacy_elmo.errors import SpacyElmoError, WeightsError
from spacy_elmo.models.bilm_layer import get_bilm
from spacy_elmo.models.loaders import load_named_weights
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.pipeline import ElmoComponent

from .util import TEXTS, elmo_nlp, load_fixture_bilm, train, weights_init_config


@pytest.fixture(scope="module")
def nlp(allennlp_model_dir):
    """elmo + a tagger listening to it, briefly trained."""
    nlp = elmo_nlp(allennlp_model_dir / "lm_weights.hdf5")
    train(nlp, 5)
    return nlp


def _reference_layers(nlp, words):
    """The biLM run directly on one sentence, as (n_layers, n_tokens, width)."""
    bilm = get_bilm(nlp.get_pipe("elmo").model)
    with torch.no_grad():
        return bilm(batch_to_char_ids([words])).layers[0].numpy()


def test_component_in_a_blank_pipeline(weights):
    nlp = spacy.blank("en")
    elmo = nlp.add_pipe("elmo")
    assert isinstance(elmo, ElmoComponent)
    assert elmo.frozen
    nlp.config["initialize"]["components"]["elmo"] = weights_init_config(weights)
    nlp.initialize()
    doc = nlp("The bank of the river was muddy.")
    assert isinstance(doc._.elmo, ElmoDocData)
    assert doc._.elmo.layers.shape == (3, len(doc), 32)  # L + 1 layers, 2 * projection_dim
    assert (doc._.elmo.n_layers, len(doc._.elmo), doc._.elmo.width) == (3, len(doc), 32)
    numpy.testing.assert_allclose(
        doc._.elmo.layers, _reference_layers(nlp, [t.text for t in doc]), rtol=0, atol=1e-6
    )
    numpy.testing.assert_array_equal(doc.tensor, doc._.elmo.layers.mean(axis=0))


def test_vectors_and_similarity_are_contextual(nlp):
    river, money = nlp("I sat on the bank of the river ."), nlp("I went to the bank to get money .")
    # The token layer is context-independent; the biLSTM layers are not.
    numpy.testing.assert_array_equal(river._.elmo.layers[0, 4], money._.elmo.layers[0, 4])
    assert not numpy.allclose(river[4].vector, money[4].vector)
    numpy.testing.assert_array_equal(river[4].vector, river.tensor[4])
    assert river[4].similarity(money[4]) < 1.0 - 1e-4
    numpy.testing.assert_allclose(river.vector, river.tensor.mean(axis=0), rtol=1e-6)
    assert river.similarity(money) < 1.0
    sport, theatre = nlp("They play football ."), nlp("We saw a play at the theatre .")
    assert not numpy.allclose(sport[1].vector, theatre[3].vector)


@pytest.mark.parametrize("doc_tensor", ["top", None])
def test_doc_tensor_setting(weights, doc_tensor):
    nlp = elmo_nlp(weights, taggers=(), elmo_config={"doc_tensor": doc_tensor})
    doc = nlp("The bank of the river.")
    if doc_tensor == "top":
        numpy.testing.assert_array_equal(doc.tensor, doc._.elmo.layers[-1])
    else:
        assert doc.tensor.size == 0 and not doc.user_token_hooks
        assert doc._.elmo.layers.shape == (3, len(doc), 32)


def test_vector_hooks_read_the_tensor_even_with_static_vectors(weights):
    nlp = elmo_nlp(weights, taggers=())
    nlp.vocab.set_vector("bank", numpy.ones((4,), dtype="f"))
    doc = nlp("The bank of the river.")
    numpy.testing.assert_array_equal(doc[1].vector, doc.tensor[1])
    numpy.testing.assert_allclose(doc[0:2].vector, doc.tensor[0:2].mean(axis=0), rtol=1e-6)
    assert -1.0 <= doc[1].similarity(doc[4]) < 1.0
    assert doc[0:2].similarity(doc) < 1.0


def test_without_vector_hooks_spacy_falls_back_on_the_tensor(weights):
    nlp = elmo_nlp(weights, taggers=(), elmo_config={"vector_hooks": False})
    doc = nlp("The bank of the river.")
    assert not doc.user_token_hooks
    numpy.testing.assert_array_equal(doc[1].vector, doc.tensor[1])  # no static vectors


def test_bad_settings_give_clear_errors():
    nlp = spacy.blank("en")
    with pytest.raises(SpacyElmoError, match="doc_tensor must be one of"):
        nlp.add_pipe("elmo", config={"doc_tensor": "median"})
    with pytest.raises(SpacyElmoError, match="Unknown biLM size"):
        nlp.add_pipe("elmo", config={"model": {"size": "huge"}})


def test_a_blank_english_pipeline_gets_the_shipped_biLM_with_no_weights_given():
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.initialize()
    doc = nlp("The bank of the river.")
    shipped = load_named_weights("english-compact")
    assert doc._.elmo.layers.shape == (shipped.n_output_layers, 6, shipped.output_dim)
    assert doc.tensor.shape == (6, shipped.output_dim)
    assert doc[1].similarity(nlp("She went to the bank to borrow money.")[4]) < 0.9999  # contextual


def test_a_non_english_pipeline_without_weights_is_told_what_to_set():
    nlp = spacy.blank("de")
    nlp.add_pipe("elmo")
    with pytest.raises(SpacyElmoError, match="ships no biLM for language 'de'.*paths.elmo_model"):
        nlp.initialize()


def test_a_weights_loader_in_the_model_config_is_used_when_initialize_gives_none(weights):
    """A non-English pipeline (no shipped default) with the loader in [components.elmo.model]."""
    nlp = spacy.blank("de")
    loader = {"@misc": "spacy-elmo.original_weights.v1", "path": str(weights)}
    nlp.add_pipe("elmo", config={"model": {"weights_loader": loader}})
    nlp.initialize()
    doc = nlp("Der Hund schläft .")
    with torch.no_grad():
        expected = load_fixture_bilm(weights)(batch_to_char_ids([[t.text for t in doc]])).layers[0].numpy()
    numpy.testing.assert_allclose(doc._.elmo.layers, expected, rtol=1e-5, atol=1e-6)


def test_docs_before_initialize_are_told_to_call_it():
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    with pytest.raises(WeightsError, match=r"not initialized\. Call nlp\.initialize\(\) first: it loads the biLM"):
        nlp("The bank of the river .")


def test_initialize_with_a_missing_weights_file_names_it(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = weights_init_config(tmp_path / "nope.hdf5")
    with pytest.raises(WeightsError, match="nope.hdf5"):
        nlp.initialize()


def test_empty_whitespace_and_one_token_docs(nlp):
    docs = list(nlp.pipe(["", "   ", "\n\n", "word", "two  words"]))
    assert [d._.elmo.layers.shape for d in docs] == [(3, 0, 32), (3, 1, 32), (3, 1, 32), (3, 1, 32), (3, 3, 32)]
    assert not docs[1]._.elmo.layers.any() and not docs[2]._.elmo.layers.any()
    assert docs[3]._.elmo.layers.any()
    assert not docs[4]._.elmo.layers[:, 1].any()  # the extra space token
    numpy.testing.assert_allclose(
        docs[4]._.elmo.layers[:, [0, 2]], _reference_layers(nlp, ["two", "words"]), rtol=0, atol=1e-6
    )
    assert [len(d) for d in docs] == [0, 1, 1, 1, 3]
    assert docs[0].tensor.shape == (0, 32)
    assert [t.tag_ for t in docs[3]]  # the tagger still predicts


def test_long_doc_without_sentence_boundaries_is_read_in_bounded_spans(nlp, monkeypatch):
    elmo = nlp.get_pipe("elmo")
    bilm = get_bilm(elmo.model)
    padded_sizes = []
    forward = bilm.forward

    def recording_forward(char_ids, **kwargs):  # a HostBatch
        padded_sizes.append(char_ids.mask.numel())  # sentences x their longest
        return forward(char_ids, **kwargs)

    monkeypatch.setattr(bilm, "forward", recording_forward)
    words = ["word", "another", "and", "more", ","] * 4000  # one sentence of 20,000 tokens
    doc = nlp(Doc(nlp.vocab, words=words))
    assert len(doc) == 20_000 and not doc.has_annotation("SENT_START")
    assert doc._.elmo.layers.shape == (3, 20_000, 32)
    assert len(padded_sizes) >= 3
    assert max(padded_sizes) <= elmo.model.attrs["max_batch_tokens"]
    # Spans of 256 tokens, each read on its own: spans 0 and 5 hold the same words.
    numpy.testing.assert_allclose(doc._.elmo.layers[:, :256], doc._.elmo.layers[:, 1280:1536], atol=1e-6)
    assert not numpy.allclose(doc._.elmo.layers[:, 256:512], doc._.elmo.layers[:, 1280:1536], atol=1e-3)


def test_sentences_are_read_separately(nlp):
    doc = nlp.make_doc("It rained . The bank of the river flooded .")
    for token in doc:
        token.is_sent_start = token.i in (0, 3)
    doc = nlp.get_pipe("elmo")(doc)
    numpy.testing.assert_allclose(
        doc._.elmo.layers[:, 3:], _reference_layers(nlp, [t.text for t in doc[3:]]), atol=1e-6
    )


def test_a_sentence_gets_the_same_layers_in_a_paragraph_as_alone():
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.initialize()  # the shipped biLM
    sentence = "She walked along the river bank until dusk."
    alone = nlp(sentence)
    paragraph = nlp(f"It had rained all day. {sentence} Then she went home, tired.")
    assert not paragraph.has_annotation("SENT_START")  # found for the biLM, not written
    start = next(t.i for t in paragraph if t.text == "She")
    inside = paragraph._.elmo.layers[:, start : start + len(alone)]
    assert numpy.abs(inside - alone._.elmo.layers).max() < 1e-5


def test_windows_across_sentences_by_name(weights):
    windows = {"model": {"get_spans": {"@misc": "spacy-elmo.doc_spans.v1", "max_length": 256}}}
    nlp = elmo_nlp(weights, taggers=(), elmo_config=windows)
    doc = nlp("It rained all day. The bank of the river flooded.")
    numpy.testing.assert_allclose(doc._.elmo.layers, _reference_layers(nlp, [t.text for t in doc]), atol=1e-6)


def test_pipe_output_does_not_depend_on_the_batch_size(nlp):
    texts = [f"{text} Number {i}." for i, text in enumerate(TEXTS * 12)]
    one = list(nlp.pipe(texts, batch_size=1))
    many = list(nlp.pipe(texts, batch_size=64))
    for a, b in zip(one, many):
        # The biLM encodes each span independently of the batch (to float
        # rounding: matrix products of different sizes round differently).
        numpy.testing.assert_allclose(a._.elmo.layers, b._.elmo.layers, rtol=1e-6, atol=1e-6)
        numpy.testing.assert_allclose(a.tensor, b.tensor, rtol=1e-6, atol=1e-6)
        assert [t.tag_ for t in a] == [t.tag_ for t in b]


_TWO_PROCESSES = """
import sys
from pathlib import Path
import numpy
from tests.pipeline.util import TEXTS, elmo_nlp
nlp = elmo_nlp(Path(sys.argv[1]))
texts = [f"{text} Number {i}." for i, text in enumerate(TEXTS * 4)]
texts += ["I sat on the bank of the river .", "I went to the bank to get money ."]
single = list(nlp.pipe(texts, batch_size=4))
double = list(nlp.pipe(texts, batch_size=4, n_process=2))
for a, b in zip(single, double):
    numpy.testing.assert_array_equal(a._.elmo.layers, b._.elmo.layers)
    numpy.testing.assert_array_equal(a.tensor, b.tensor)
    # The Docs come back as bytes, and get their vector hooks again: the same vectors and similarities.
    numpy.testing.assert_array_equal(b[0].vector, a[0].vector)
    numpy.testing.assert_allclose(b.vector, a.vector, rtol=1e-6)
    numpy.testing.assert_allclose(b[:2].vector, a[:2].vector, rtol=1e-6)
(river, money), (river_2, money_2) = single[-2:], double[-2:]
assert river_2[4].similarity(money_2[4]) == river[4].similarity(money[4]) < 1 - 1e-4, "bank is bank"
assert river_2.similarity(money_2) == river.similarity(money)
tuples = list(nlp.pipe([(text, i) for i, text in enumerate(texts[-2:])], as_tuples=True, n_process=2))
assert [context for _, context in tuples] == [0, 1]
assert tuples[0][0][4].similarity(tuples[1][0][4]) == river[4].similarity(money[4])
print("same docs")
"""


@pytest.mark.slow
def test_two_processes_give_the_same_docs_without_warnings(allennlp_model_dir):
    # In its own process: pytest records a forked worker's warnings instead of printing them.
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _TWO_PROCESSES, str(allennlp_model_dir / "lm_weights.hdf5")],
        cwd=root, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "same docs" in done.stdout
    assert "W109" not in done.stderr


@pytest.mark.filterwarnings("ignore:.*W109")
def test_doc_data_survives_docbin_and_doc_bytes(nlp):
    docs = list(nlp.pipe(TEXTS))
    restored = list(DocBin(docs=docs, store_user_data=True).from_bytes(
        DocBin(docs=docs, store_user_data=True).to_bytes()
    ).get_docs(nlp.vocab))
    for a, b in zip(docs, restored):
        assert b._.elmo.layers.dtype == numpy.float32
        numpy.testing.assert_array_equal(a._.elmo.layers, b._.elmo.layers)
        assert b._.elmo.hooks == "mean" and not b.user_token_hooks
    # What nlp.pipe(n_process=2) does to the Docs it reads back: "bank" of a river is not "bank" of a robber.
    for doc in restored[:2]:
        restore_vector_hooks(doc)
    assert restored[0][1].similarity(restored[1][3]) == docs[0][1].similarity(docs[1][3]) < 1 - 1e-4
    again = Doc(nlp.vocab).from_bytes(docs[0].to_bytes())
    numpy.testing.assert_array_equal(again._.elmo.layers, docs[0]._.elmo.layers)
    numpy.testing.assert_array_equal(again.tensor, docs[0].tensor)


def test_doc_cleaner_drops_the_layers(nlp):
    cleaner = spacy.blank("en", vocab=nlp.vocab)
    cleaner.add_pipe("doc_cleaner", config={"attrs": {"_.elmo": None, "tensor": None}})
    doc = cleaner(nlp("The bank."))
    assert doc._.elmo is None and doc.tensor is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_output_matches_cpu(weights):
    from thinc.api import require_gpu, use_ops

    cpu = elmo_nlp(weights, taggers=())
    expected = cpu("The bank of the river.")._.elmo.layers
    require_gpu(0)
    try:
        gpu = elmo_nlp(weights, taggers=())
        got = gpu("The bank of the river.")._.elmo.layers
        numpy.testing.assert_allclose(got.get() if hasattr(got, "get") else got, expected, atol=1e-4)
    finally:
        use_ops("numpy")


# token/span/Doc vectors stay ELMo's when a later component overwrites Doc.tensor.


@Language.component("spacy_elmo_test_overwrite_tensor")
def _overwrite_tensor(doc):
    doc.tensor = numpy.ones((len(doc), 7), dtype="float32")  # as a tok2vec after elmo would
    return doc


def test_vectors_read_the_elmo_mix_not_a_later_tensor(weights):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"doc_tensor": "top"})
    nlp.add_pipe("spacy_elmo_test_overwrite_tensor")
    nlp.config["initialize"]["components"]["elmo"] = weights_init_config(weights)
    nlp.initialize()
    river, money = nlp("I sat on the bank of the river ."), nlp("I went to the bank to get money .")
    assert river.tensor.shape == (len(river), 7)
    numpy.testing.assert_array_equal(river[4].vector, river._.elmo.layers[-1][4])
    numpy.testing.assert_allclose(river[1:3].vector, river._.elmo.layers[-1][1:3].mean(axis=0), rtol=1e-6)
    assert river[4].similarity(money[4]) < 1.0 - 1e-4


def test_vectors_fall_back_to_the_tensor_without_doc_data(weights):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = weights_init_config(weights)
    nlp.initialize()
    doc = nlp("The bank of the river .")
    doc._.elmo = None  # what doc_cleaner does
    numpy.testing.assert_array_equal(doc[1].vector, doc.tensor[1])
