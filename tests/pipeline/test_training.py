"""Training with ELMo listeners: what learns, what stays frozen, reloading."""
import io

import numpy
import pytest
import spacy
import torch
from spacy.training.loggers import console_logger

from spacy_elmo.errors import SpacyElmoError
from spacy_elmo.models.bilm_layer import get_bilm
from spacy_elmo.models.scalar_mix_layer import mix_parameters

from .util import TEXTS, elmo_nlp, hash_embed_config, listener_config, train, train_examples


def _bilm_state(nlp):
    return {k: v.detach().clone() for k, v in get_bilm(nlp.get_pipe("elmo").model).state_dict().items()}


def _mix(nlp, component):
    return mix_parameters(nlp.get_pipe(component).model.get_ref("tok2vec").head.get_ref("mixer"))


def _changed(before, after):
    return [k for k in before if not torch.equal(before[k], after[k])]


def test_training_a_tagger_learns_the_mix_but_not_the_frozen_bilm(weights):
    nlp = elmo_nlp(weights, frozen=True)
    bilm_before = _bilm_state(nlp)
    weights_before, gamma_before = _mix(nlp, "tagger")
    numpy.testing.assert_allclose(weights_before, [1 / 3] * 3)  # starts as the layer average
    losses = train(nlp, 8)
    assert "elmo" not in losses and "tagger" in losses  # a frozen biLM has no loss to report
    weights_after, gamma_after = _mix(nlp, "tagger")
    assert not numpy.allclose(weights_after, weights_before)
    assert gamma_after != gamma_before
    assert _changed(bilm_before, _bilm_state(nlp)) == []


def test_spacy_train_logs_no_loss_column_for_a_frozen_elmo(weights):
    """A frozen elmo is not trainable, so spaCy's console logger gives it no "Loss elmo" column."""
    for frozen in (True, False):
        nlp = elmo_nlp(weights, frozen=frozen)
        assert nlp.get_pipe("elmo").is_trainable is not frozen
        stdout = io.StringIO()
        console_logger(progress_bar=False)(nlp, stdout, io.StringIO())
        header = " ".join(stdout.getvalue().splitlines()[0].split())
        assert header.startswith("E # LOSS ELMO LOSS TAGGER" if not frozen else "E # LOSS TAGGER"), header


def test_fine_tuning_changes_the_bilm(weights):
    nlp = elmo_nlp(weights, frozen=False)
    bilm_before = _bilm_state(nlp)
    losses = train(nlp, 3)
    assert losses["elmo"] > 0.0
    changed = _changed(bilm_before, _bilm_state(nlp))
    assert any(k.startswith("lstm.") for k in changed) and any(k.startswith("char_encoder.") for k in changed)


def _bilm_gradients(weights, grad_factors):
    """The biLM's gradients after one update of a tagger and a morphologizer
    whose listeners scale their gradients by ``grad_factors``."""
    spacy.util.fix_random_seed(0)
    nlp = elmo_nlp(weights, frozen=False, taggers=("tagger",), morphologizer=True)
    elmo = nlp.get_pipe("elmo")
    assert elmo.listening_components == ["tagger", "morphologizer"]
    for listener, factor in zip(elmo.listeners, grad_factors):
        listener.attrs["grad_factor"] = factor
    examples = train_examples(nlp)
    # The taggers' output layers start at zero (no gradient reaches the biLM yet).
    nlp.update(examples, sgd=nlp.create_optimizer())
    # sgd=False as in `spacy train`: finish_update comes after all components.
    nlp.update(examples, sgd=False)
    return [p.grad for p in get_bilm(elmo.model).parameters()]


def test_fine_tuning_sums_the_gradients_of_all_listeners(weights):
    both = _bilm_gradients(weights, (1.0, 1.0))
    tagger_only = _bilm_gradients(weights, (1.0, 0.0))
    morph_only = _bilm_gradients(weights, (0.0, 1.0))
    assert all(g.abs().sum() > 0 for g in tagger_only[-3:])
    for g_both, g_tagger, g_morph in zip(both, tagger_only, morph_only):
        torch.testing.assert_close(g_both, g_tagger + g_morph, rtol=1e-4, atol=1e-6)


def test_two_listeners_learn_different_mixes(weights):
    nlp = elmo_nlp(weights, taggers=("tagger",), morphologizer=True)
    train(nlp, 12)
    tagger_weights, tagger_gamma = _mix(nlp, "tagger")
    morph_weights, morph_gamma = _mix(nlp, "morphologizer")
    assert not numpy.allclose(tagger_weights, morph_weights, atol=1e-5)
    assert tagger_gamma != morph_gamma


def test_frozen_components_need_annotating_components(weights):
    nlp = elmo_nlp(weights)
    examples = train_examples(nlp)
    with pytest.raises(SpacyElmoError, match="annotating_components"):
        nlp.update(examples, exclude=["elmo"])
    # As an annotating component the layers come from doc._.elmo instead.
    losses = {}
    nlp.update(examples, sgd=nlp.create_optimizer(), exclude=["elmo"], annotates=["elmo"], losses=losses)
    assert losses["tagger"] > 0


def test_a_reloaded_pipeline_predicts_the_same(weights, tmp_path):
    nlp = elmo_nlp(weights, listener=listener_config(token_embedding=hash_embed_config(), width=24))
    train(nlp, 5)
    nlp.to_disk(tmp_path / "pipeline")
    reloaded = spacy.load(tmp_path / "pipeline")
    assert reloaded.get_pipe("elmo").listening_components == ["tagger"]
    for a, b in zip(nlp.pipe(TEXTS), reloaded.pipe(TEXTS)):
        assert [t.tag_ for t in a] == [t.tag_ for t in b]
        numpy.testing.assert_array_equal(a._.elmo.layers, b._.elmo.layers)
    numpy.testing.assert_array_equal(_mix(nlp, "tagger")[0], _mix(reloaded, "tagger")[0])
    # ... and it keeps training.
    train(reloaded, 2)
