"""The step counter and the running sums behind each log line."""
import math
from types import SimpleNamespace

import pytest
import torch

from spacy_elmo.pretraining import progress as progress_module
from spacy_elmo.pretraining.processes import Processes
from spacy_elmo.pretraining.progress import Progress
from spacy_elmo.pretraining.trainer import StepResult

CPU = torch.device("cpu")


def _result(forward, backward, n_tokens, *, finite=True, grad_norm=1.0):
    return StepResult(torch.tensor([forward, backward]), n_tokens, torch.tensor(finite), torch.tensor(grad_norm))


@pytest.fixture()
def clock(monkeypatch):
    """A clock the test moves: ``clock.now``."""
    fake = SimpleNamespace(now=100.0)
    monkeypatch.setattr(progress_module, "time", SimpleNamespace(perf_counter=lambda: fake.now))
    return fake


def test_settle_sums_the_finite_steps_and_returns_each_skipped_one_with_those_in_a_row():
    progress = Progress(device=CPU)
    for result in (_result(1.0, 2.0, 3), _result(math.nan, 0.0, 4, finite=False),
                   _result(0.0, math.inf, 5, finite=False), _result(4.0, 8.0, 6, grad_norm=3.0)):
        progress.add(result)
    assert progress.settle() == [(2, 1), (3, 2)]
    assert (progress.step, progress.nll, progress.tokens, progress.grad_norm) == (4, [5.0, 10.0], 9, 4.0)
    assert (progress.skipped, progress.nonfinite_run) == (2, 0)
    assert progress.settle() == []


def test_skipped_steps_in_a_row_are_counted_across_settles():
    progress = Progress(device=CPU)
    progress.add(_result(0.0, 0.0, 1, finite=False))
    progress.settle()
    progress.add(_result(0.0, 0.0, 1, finite=False))
    assert progress.settle() == [(2, 2)]


def test_a_log_record_averages_the_interval_and_starts_a_new_one(clock):
    progress = Progress(device=CPU)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.25)
    progress.add(_result(2.0, 4.0, 2, grad_norm=2.0))
    progress.add(_result(0.0, 0.0, 7, finite=False))
    progress.add(_result(2.0, 4.0, 2, grad_norm=4.0))
    clock.now += 3.0
    progress.exclude(1.0)  # an evaluation: left out of the throughput
    record = progress.log_record(Processes(0, 1, CPU), 40, optimizer)
    assert record == {
        "kind": "train", "step": 3, "epoch": 0.1, "tokens": 4, "train_loss": 1.5,
        "train_perplexity_forward": pytest.approx(math.e), "train_perplexity_backward": pytest.approx(math.e ** 2),
        "train_perplexity": pytest.approx((math.e + math.e ** 2) / 2), "grad_norm": 3.0, "skipped_steps": 1,
        "learn_rate": 0.25, "tokens_per_second": 2.0, "elapsed_seconds": 2.0,
    }
    assert (progress.nll, progress.tokens, progress.steps, progress.skipped) == ([0.0, 0.0], 0, 0, 0)
    progress.add(_result(1.0, 1.0, 4))
    clock.now += 1.0
    assert progress.log_record(Processes(0, 1, CPU), 40, optimizer)["tokens"] == 8


@pytest.mark.parametrize("n_train_tokens", [None, 0], ids=["not counted", "empty"])
def test_there_is_no_epoch_without_a_count_of_training_tokens(n_train_tokens):
    assert Progress(device=CPU).epoch(n_train_tokens) is None


def test_a_loaded_state_is_the_saved_one_with_unsettled_steps_settled():
    progress = Progress(device=CPU)
    progress.add(_result(1.0, 2.0, 3, grad_norm=0.5))
    progress.add(_result(0.0, 0.0, 3, finite=False))
    progress.tokens_seen, progress.elapsed = 11, 7.5
    local, shared = progress.local_state(), progress.shared_state()
    loaded = Progress(device=CPU)
    loaded.load(progress.step, shared, local)
    fields = ("step", "tokens_seen", "nonfinite_run", "elapsed", "nll", "tokens", "grad_norm", "steps", "skipped")
    assert [getattr(loaded, name) for name in fields] == [2, 11, 1, 7.5, [1.0, 2.0], 3, 0.5, 2, 1]
