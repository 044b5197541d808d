"""Training checkpoints: written atomically, loaded with clear errors, the training state round-tripped."""
import dataclasses
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from spacy_elmo.errors import CheckpointError, WeightsError
from spacy_elmo.models.pytorch.options import NAMED_SIZES
from spacy_elmo.pretraining.checkpoint import (
    CHECKPOINT_FORMAT,
    _tensors,
    check_vocabulary,
    load_checkpoint,
    restore_training_state,
    save_checkpoint,
    save_training_state,
    saved_sections,
)
from spacy_elmo.pretraining.config import ModelConfig, resolve_model
from spacy_elmo.pretraining.processes import Processes
from spacy_elmo.pretraining.progress import Progress
from spacy_elmo.pretraining.run_directory import RunDirectory
from spacy_elmo.pretraining.trainer import StepResult
from spacy_elmo.pretraining.vocab import Vocabulary

from .util import fast_config

COMPLETE = {"step": 3, "model": {"w": torch.ones(2)}, "optimizer": {}, "processes": [], "config": "", "vocab": "x"}


def test_a_saved_checkpoint_loads_with_its_format_and_tensors(tmp_path):
    save_checkpoint(COMPLETE, tmp_path / "checkpoint.pt")
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    assert state["format"] == CHECKPOINT_FORMAT and state["step"] == 3
    assert torch.equal(state["model"]["w"], torch.ones(2))


def test_a_failed_write_keeps_the_previous_checkpoint_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(COMPLETE, path)
    before = path.read_bytes()

    def failing_save(obj, f):
        raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(CheckpointError, match=r"Could not write .*checkpoint.pt \(PytorchStreamWriter failed.*\); "
                       r"the previous checkpoint is kept"):
        save_checkpoint({**COMPLETE, "step": 4}, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


@pytest.mark.parametrize("content,message", [
    (None, r"No checkpoint at .*checkpoint.pt \(nothing to resume\)"),
    (b"garbage", r"checkpoint.pt: corrupt or unreadable checkpoint \("),
    ([1, 2], r"checkpoint.pt: not a spacy-elmo pretraining checkpoint"),
    ({"step": 3}, r"checkpoint.pt: not a spacy-elmo pretraining checkpoint"),
    ({"format": CHECKPOINT_FORMAT, "step": 3, "model": {}},
     r"incomplete checkpoint \(missing optimizer, processes, config, vocab\)"),
    ({"format": CHECKPOINT_FORMAT, **COMPLETE, "step": True}, r"damaged checkpoint \(its step is True, not a count"),
    ({"format": CHECKPOINT_FORMAT, **COMPLETE, "step": -1}, r"damaged checkpoint \(its step is -1, not a count"),
    ({"format": CHECKPOINT_FORMAT, **COMPLETE, "step": 2.0}, r"damaged checkpoint \(its step is 2.0, not a count"),
], ids=["missing", "garbage", "a list", "no format", "incomplete", "step True", "step -1", "step 2.0"])
def test_a_checkpoint_that_is_not_one_is_refused_with_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "checkpoint.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        torch.save(content, path)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path)


def test_a_complex_tensor_deep_in_a_checkpoint_is_refused_by_its_place(tmp_path):
    layers = [torch.ones(1), torch.ones(1, dtype=torch.complex64)]
    torch.save({"format": CHECKPOINT_FORMAT, **COMPLETE, "model": {"layers": layers}}, tmp_path / "checkpoint.pt")
    with pytest.raises(WeightsError, match=r"checkpoint.pt: 'model/layers/1' is a complex tensor"):
        load_checkpoint(tmp_path / "checkpoint.pt")


def test_tensors_visits_a_container_in_a_cycle_once():
    nest = {"a": [torch.zeros(1)], "b": (torch.ones(2),)}
    nest["a"].append(nest)
    assert sorted(name for name, _ in _tensors(nest)) == ["a/0", "b/0"]


def test_saved_sections_resolves_a_named_size_and_returns_anything_else_as_it_is():
    written = {f.name: None for f in dataclasses.fields(ModelConfig)}
    written.update(size="tiny", lstm_dim=32)
    got = saved_sections({"sections": {"model": written, "vocab": {"size": 5}}})
    assert got == {"model": resolve_model(ModelConfig(**written)).to_dict(), "vocab": {"size": 5}}
    resolved = {"model": NAMED_SIZES["tiny"].to_dict()}
    assert saved_sections({"sections": resolved}) is resolved
    unresolvable = {"model": {"size": "no such size"}}
    assert saved_sections({"sections": unresolvable}) is unresolvable
    assert saved_sections({}) is None


def test_check_vocabulary_refuses_another_vocabulary(tmp_path):
    vocab = Vocabulary.from_counts(Counter("abc"), max_size=10)
    directory = RunDirectory(tmp_path)
    check_vocabulary({"vocab": vocab.fingerprint()}, directory, vocab)
    with pytest.raises(CheckpointError, match=r"vocab.txt is not the vocabulary of .*checkpoint.pt"):
        check_vocabulary({"vocab": "0123456789abcdef"}, directory, vocab)


class _Batches:
    def __init__(self, state=None):
        self.state = state

    def state_dict(self):
        return self.state

    def load_state_dict(self, state):
        self.state = state


def _trainer():
    model = torch.nn.Linear(2, 1)
    model.bilm = SimpleNamespace(options=NAMED_SIZES["tiny"])
    cpu = torch.device("cpu")
    return SimpleNamespace(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.5), sampler=None,
                           device=cpu, processes=Processes(0, 1, cpu))


def test_a_restored_training_state_continues_where_it_was_saved(tmp_path):
    cpu = torch.device("cpu")
    progress = Progress(device=cpu)
    progress.add(StepResult(torch.tensor([2.0, 3.0]), 5, torch.tensor(True), torch.tensor(1.5)))
    vocab = Vocabulary.from_counts(Counter("abc"), max_size=10)
    torch.manual_seed(1)
    save_training_state(tmp_path / "checkpoint.pt", trainer=_trainer(), batches=_Batches({"position": 7}),
                        progress=progress, config=fast_config(tmp_path / "train.txt"), vocab=vocab, origin={"a": 1})
    expected = torch.rand(3)
    checkpoint = load_checkpoint(tmp_path / "checkpoint.pt")
    assert checkpoint["origin"] == {"a": 1} and checkpoint["vocab"] == vocab.fingerprint()
    restored, batches = Progress(device=cpu), _Batches()
    restore_training_state(checkpoint, tmp_path / "checkpoint.pt", trainer=_trainer(), batches=batches,
                           progress=restored)
    assert torch.equal(torch.rand(3), expected)
    assert batches.state == {"position": 7}
    assert (restored.step, restored.nll, restored.tokens, restored.grad_norm) == (1, [2.0, 3.0], 5, 1.5)


def test_a_training_state_that_cannot_be_restored_says_so(tmp_path):
    message = r"checkpoint.pt: cannot restore the training state \(KeyError\('processes'"
    with pytest.raises(CheckpointError, match=message):
        restore_training_state({"optimizer": _trainer().optimizer.state_dict(), "step": 1}, tmp_path / "checkpoint.pt",
                               trainer=_trainer(), batches=_Batches(), progress=Progress(device=torch.device("cpu")))
