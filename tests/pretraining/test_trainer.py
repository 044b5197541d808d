"""A training step: the host prepares it, the device takes it without reading anything back."""
import copy
from collections import Counter

import pytest
import torch

from spacy_elmo.models.pytorch.char_cnn import TokenVectorCache
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.models.pytorch.options import NAMED_SIZES
from spacy_elmo.pretraining.assembly import assemble_model
from spacy_elmo.pretraining.processes import Processes
from spacy_elmo.pretraining.trainer import Trainer, _optimizer
from spacy_elmo.pretraining.vocab import Vocabulary

from ..sync_checks import no_host_sync
from .util import fast_config


@pytest.fixture(scope="module")
def sentences(tiny_text):
    lines = [line.split() for line in tiny_text.read_text(encoding="utf8").splitlines() if line.strip()]
    return [line[start : start + 12] for line in lines for start in range(0, len(line), 12)]


def _trainer(sentences, tiny_text, *, negatives=None, **settings):
    vocab = Vocabulary.from_counts(Counter(w for s in sentences for w in s), max_size=1000)
    config = fast_config(tiny_text, **settings)
    torch.manual_seed(0)
    model = assemble_model(len(vocab), dropout=0.1, options=NAMED_SIZES["tiny"])
    return Trainer(
        model, vocab, Processes(0, 1, torch.device("cpu")), optimizer=config.optimizer,
        negative_samples=negatives, gradient_scale=config.training.gradient_scale, grad_clip=config.training.grad_clip,
    )


@pytest.mark.parametrize("negatives", [None, 8], ids=["full softmax", "sampled softmax"])
@pytest.mark.parametrize("optimizer", ["adagrad", "adam"])
def test_a_pretraining_step_does_not_synchronise(sentences, tiny_text, negatives, optimizer):
    """The host prepares a step (ids, packing, targets, negatives); the device's part --
    forward, backward, clipping, the update skipped or not on the device -- reads nothing
    back (on the CPU: no op that would make the host wait for a GPU, no tolist or numpy)."""
    trainer = _trainer(
        sentences, tiny_text, negatives=negatives, optimizer__name=optimizer, training__grad_clip=1.0,
        optimizer__learn_rate=0.01,
    )
    trainer.train_step(sentences[:4])
    prepared = [trainer.prepare(sentences[start : start + 4]) for start in range(4, 16, 4)]
    with no_host_sync("cpu"):
        results = [trainer.step(step) for step in prepared]
    assert all(bool(result.finite) for result in results)


def test_a_step_whose_loss_is_not_finite_leaves_the_weights_and_the_optimizer_as_they_were(sentences, tiny_text):
    trainer = _trainer(sentences, tiny_text, training__gradient_scale=3e38)  # the scaled loss overflows
    trainer.train_step(sentences[:4])
    weights = copy.deepcopy(trainer.model.state_dict())
    optimizer = copy.deepcopy(trainer.optimizer.state_dict())
    result = trainer.train_step(sentences[4:8])
    assert not result.finite
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(value, weights[name]), name
    for key, state in trainer.optimizer.state_dict()["state"].items():
        assert all(torch.equal(value, optimizer["state"][key][name]) for name, value in state.items())


def test_prediction_reads_the_weights_a_fused_step_wrote(sentences, tiny_text):
    """A fused optimizer writes the weights unseen by torch's version counters; prediction's
    prepacked products and token vectors must not keep the old ones."""
    trainer = _trainer(sentences, tiny_text)
    bilm = trainer.model.bilm
    char_ids, cache = batch_to_char_ids(sentences[:8]), TokenVectorCache(100)
    with torch.inference_mode():
        before = bilm.eval()(char_ids, token_cache=cache).layers  # derives prepacked weights and token vectors
    trainer.train_step(sentences[8:16])
    with torch.inference_mode():
        got = bilm.eval()(char_ids, token_cache=cache).layers
        expected = copy.deepcopy(bilm).eval()(char_ids).layers  # a copy derives nothing before
    assert not torch.allclose(got, before, rtol=0, atol=1e-3)
    # float32 rounding: products through prepacked weights or MKL's.
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)


def test_a_checkpoint_of_an_unfused_optimizer_loads_into_the_fused_one(sentences, tiny_text):
    """Runs checkpointed before the optimizer was fused resume with it fused."""
    earlier = _trainer(sentences, tiny_text)
    unfused = _optimizer(fast_config(tiny_text).optimizer, list(earlier.model.parameters()), fused=None)
    earlier.optimizer = unfused
    earlier.train_step(sentences[:4])
    trainer = _trainer(sentences, tiny_text)
    trainer.optimizer.load_state_dict(unfused.state_dict())
    assert all(group["fused"] for group in trainer.optimizer.param_groups)
    assert bool(trainer.train_step(sentences[4:8]).finite)
    step = trainer.optimizer.state_dict()["state"][0]["step"]
    assert step == 2 and step.dtype == torch.float32
