"""Numerical parity with the reference implementations (tests/fixtures/elmo_reference)."""
import json

import h5py
import numpy
import pytest
import torch

from .stateful_replay import StatefulBiLM
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids, token_char_ids
from spacy_elmo.models.pytorch.original_format import load_bilm


def _sentences(path):
    with open(path, encoding="utf8") as handle:
        return json.load(handle)


def _top_layer(path, index):
    with h5py.File(path, "r") as handle:
        halves = handle[str(index)][...]
    return numpy.concatenate([halves[0], halves[1]], axis=-1)


def test_token_layer_matches_allennlp(fixture_bilm, allennlp_model_dir):
    vocab = (allennlp_model_dir / "vocab_test.txt").read_text(encoding="utf8").strip().split("\n")
    assert len(vocab) == 458
    ids = torch.tensor([token_char_ids(token) for token in vocab])
    with torch.no_grad():
        vectors = fixture_bilm.char_encoder(ids).numpy()
    with h5py.File(allennlp_model_dir / "elmo_token_embeddings.hdf5", "r") as handle:
        expected = handle["embedding"][...]
    numpy.testing.assert_allclose(vectors, expected, atol=1e-6)


@pytest.mark.parametrize(
    "model_dir,weights,sentences",
    [
        ("allennlp", "lm_weights.hdf5", "sentences.json"),
        ("bilm-tf/model", "lm_weights.hdf5", "lm_embeddings_sentences.json"),
    ],
)
def test_top_layer_matches_stateful_reference(reference_dir, model_dir, weights, sentences):
    """Replay the reference's stateful run: 10 batches of 3, state carried row by row."""
    directory = reference_dir / model_dir
    stateful = StatefulBiLM(load_bilm(directory / weights).eval())
    texts = _sentences(directory / sentences)
    for i in range(10):
        batch = [texts[k][i].split() for k in range(3)]
        with torch.no_grad():
            output = stateful(batch_to_char_ids(batch))
        for k, tokens in enumerate(batch):
            expected = _top_layer(directory / f"lm_embeddings_{k}.hdf5", i)
            assert output.mask[k].sum().item() == len(tokens) == expected.shape[0]
            got = output.layers[k, 2, : len(tokens)].numpy()
            assert numpy.allclose(got, expected, atol=1e-6)


def test_stateless_batch0_matches_upstream_and_later_batches_differ(fixture_bilm, allennlp_model_dir):
    """Without carried state only batch 0 equals the (stateful) upstream files."""
    texts = _sentences(allennlp_model_dir / "sentences.json")
    for i, should_match in ((0, True), (1, False)):
        batch = [texts[k][i].split() for k in range(3)]
        with torch.no_grad():
            layers = fixture_bilm(batch_to_char_ids(batch)).layers
        expected = _top_layer(allennlp_model_dir / "lm_embeddings_0.hdf5", i)
        got = layers[0, 2, : expected.shape[0]].numpy()
        assert numpy.allclose(got, expected, atol=1e-6) == should_match


def test_all_layers_match_state_carry_reference(allennlp_model_dir):
    reference = numpy.load(allennlp_model_dir / "derived" / "allennlp_layers_state_carry_bs3.npz")
    sentences = json.loads(str(reference["meta"]))["sentences"]
    stateful = StatefulBiLM(load_bilm(allennlp_model_dir / "lm_weights.hdf5").eval())
    for start in range(0, len(sentences), 3):
        with torch.no_grad():
            layers = stateful(batch_to_char_ids(sentences[start : start + 3])).layers
        expected = reference["layers"][start : start + 3, :, : layers.shape[2]]
        assert numpy.allclose(layers.numpy(), expected, atol=1e-6)


def test_all_layers_match_state_reset_reference(fixture_bilm, allennlp_model_dir):
    reference = numpy.load(allennlp_model_dir / "derived" / "allennlp_layers_state_reset_bs1.npz")
    sentences = json.loads(str(reference["meta"]))["sentences"]
    with torch.no_grad():
        output = fixture_bilm(batch_to_char_ids(sentences))
    assert output.layers.shape == reference["layers"].shape
    numpy.testing.assert_array_equal(output.mask.numpy(), reference["mask"].astype(bool))
    numpy.testing.assert_array_equal(
        batch_to_char_ids(sentences).numpy(), reference["char_ids"]
    )
    assert numpy.allclose(output.layers.numpy(), reference["layers"], atol=1e-6)


def test_boundary_steps_do_not_change_outputs(fixture_bilm, allennlp_model_dir):
    texts = _sentences(allennlp_model_dir / "sentences.json")
    char_ids = batch_to_char_ids([t.split() for t in texts[0]])
    with torch.no_grad():
        plain = fixture_bilm(char_ids).layers
        with_steps, final_state = StatefulBiLM(fixture_bilm)._encode(char_ids, None)
    assert len(final_state) == fixture_bilm.lstm.n_layers
    torch.testing.assert_close(plain, with_steps.layers, rtol=0, atol=1e-6)
