"""The joint forward + backward LM objective on top of the biLM."""
from collections import Counter

import torch

from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.pretraining.language_model import BiLMLanguageModel, LMBatch, n_predictions, target_ids
from spacy_elmo.pretraining.softmax import LMSoftmax, LogUniformSampler
from spacy_elmo.pretraining.vocab import Vocabulary

from ..sync_checks import no_host_sync

SENTENCES = [["the", "cat", "sat", "down"], ["a", "dog"], ["the", "end", "of", "it", "all"]]


def _model(fixture_bilm):
    torch.manual_seed(0)
    vocab = Vocabulary.from_counts(Counter(w for s in SENTENCES for w in s if w != "all"), max_size=100)
    return BiLMLanguageModel(fixture_bilm, LMSoftmax(len(vocab), 16)).eval(), vocab


def test_target_ids_layout():
    vocab = Vocabulary.from_counts(Counter(["a", "a", "b"]), max_size=10)
    ids = target_ids([["a", "b"], ["zzz"]], vocab)
    assert ids.tolist() == [[0, 3, 4, 1], [0, 2, 1, 0]]
    assert n_predictions([["a", "b"], ["zzz"]]) == 5


def test_a_batch_of_sentences_is_the_batch_of_their_ids_and_targets(fixture_bilm):
    model, vocab = _model(fixture_bilm)
    for sentences in (SENTENCES, [["all", "all"], []], [[]]):
        made = LMBatch.of_sentences(sentences, fixture_bilm.token_ids, vocab)
        expected = model.prepare(batch_to_char_ids(sentences), target_ids(sentences, vocab))
        assert torch.equal(made.targets, expected.targets) and made.targets.dtype == torch.int32
        assert torch.equal(made.bilm.token_index, expected.bilm.token_index)
        assert torch.equal(made.bilm.tokens.ids, expected.bilm.tokens.ids)
        assert torch.equal(made.bilm.output_index, expected.bilm.output_index)


def test_forward_predicts_the_next_word_and_backward_the_previous(fixture_bilm):
    model, vocab = _model(fixture_bilm)
    char_ids, targets = batch_to_char_ids(SENTENCES), target_ids(SENTENCES, vocab)
    with torch.no_grad():
        nll, encoding = model.token_nll(char_ids, targets)
        layers = fixture_bilm(char_ids).layers  # (batch, L + 1, tokens, 2P), boundaries removed
    assert nll.shape == (2, n_predictions(SENTENCES))
    checked = 0
    for k, (row, fwd_pos, bwd_pos) in enumerate(
        zip(encoding.rows.tolist(), encoding.forward_positions.tolist(), encoding.backward_positions.tolist())
    ):
        n = len(SENTENCES[row])
        if 1 <= fwd_pos <= n:  # a word position: its forward state predicts position + 1
            hidden = layers[row, -1, fwd_pos - 1, :16]
            expected = model.softmax.nll(hidden[None], targets[row, fwd_pos + 1][None])
            torch.testing.assert_close(nll[0, k], expected[0], rtol=1e-5, atol=1e-5)
            checked += 1
        if 1 <= bwd_pos <= n:  # its backward state predicts position - 1
            hidden = layers[row, -1, bwd_pos - 1, 16:]
            expected = model.softmax.nll(hidden[None], targets[row, bwd_pos - 1][None])
            torch.testing.assert_close(nll[1, k], expected[0], rtol=1e-5, atol=1e-5)
            checked += 1
    assert checked == 2 * sum(len(s) for s in SENTENCES)
    # Every prediction of </S> (forward) and <S> (backward) is there once per sentence.
    forward_targets = targets[encoding.rows, encoding.forward_positions + 1]
    backward_targets = targets[encoding.rows, encoding.backward_positions - 1]
    assert (forward_targets == vocab.eos_id).sum() == len(SENTENCES)
    assert (backward_targets == vocab.bos_id).sum() == len(SENTENCES)
    torch.testing.assert_close(model(char_ids, targets), nll.sum(dim=1))


def test_both_directions_train_the_shared_character_cnn_and_softmax(fixture_bilm):
    model, vocab = _model(fixture_bilm)
    model.train()
    nll = model(batch_to_char_ids(SENTENCES), target_ids(SENTENCES, vocab))
    grads = {}
    for direction in (0, 1):
        model.zero_grad()
        nll[direction].backward(retain_graph=True)
        lstm = model.bilm.lstm
        grads[direction] = (
            model.bilm.char_encoder.char_embedding.grad.abs().sum().item(),
            model.softmax.weight.grad.abs().sum().item(),
            lstm.hidden_weights[0].grad[direction].abs().sum().item(),
            lstm.hidden_weights[0].grad[1 - direction].abs().sum().item(),
        )
    for direction in (0, 1):
        char_cnn, softmax, own_lstm, other_lstm = grads[direction]
        assert char_cnn > 0 and softmax > 0 and own_lstm > 0 and other_lstm == 0


def test_the_language_model_s_forward_and_backward_do_not_synchronise(fixture_bilm):
    """On meta, a stand-in GPU, a step takes a GPU's paths (no CPU threads, GPU-sized
    softmax chunks) and never reads the device: the host prepared the batch."""
    model, vocab = _model(fixture_bilm)
    model = model.to("meta").train()
    for candidates in (None, LogUniformSampler(len(vocab), 4).sample()):
        batch = model.prepare(batch_to_char_ids(SENTENCES), target_ids(SENTENCES, vocab))
        with no_host_sync() as copies_back:
            nll = model(batch.to("meta"), None, None if candidates is None else candidates.to("meta"))
            nll.sum().backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            assert (torch.isfinite(norm) & torch.isfinite(nll).all()).device.type == "meta"
        assert copies_back == [] and model.softmax.weight.grad.device.type == "meta"
