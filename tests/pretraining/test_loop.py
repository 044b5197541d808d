"""The training loop's guards and messages (whole runs: test_run.py, test_resume.py)."""
import math
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from spacy_elmo.errors import TrainingError
from spacy_elmo.pretraining.loop import DIVERGENCE_FACTOR, TrainingLoop, _dev_line
from spacy_elmo.pretraining.processes import Processes
from spacy_elmo.pretraining.progress import Progress
from spacy_elmo.pretraining.run_directory import RunDirectory
from spacy_elmo.pretraining.vocab import Vocabulary

from .util import fast_config


def _loop(tmp_path, *, weight=1.0, stats=None, **settings):
    """A loop over a one-weight model; nothing in it trains."""
    model = torch.nn.Linear(1, 1)
    with torch.no_grad():
        model.weight.fill_(weight)
    cpu = torch.device("cpu")
    return TrainingLoop(
        config=fast_config(tmp_path / "train.txt", **settings), directory=RunDirectory(tmp_path),
        trainer=SimpleNamespace(model=model, processes=Processes(0, 1, cpu)), batches=None,
        progress=Progress(device=cpu), vocab=Vocabulary.from_counts(Counter("abcdefg"), max_size=10), max_steps=10,
        dev=None, stats=stats, origin={},
    )


def test_a_loss_over_the_divergence_factor_times_a_uniform_guess_stops_the_run(tmp_path):
    loop = _loop(tmp_path, optimizer__learn_rate=0.5)
    uniform = math.log(len(loop.vocab))
    loop._check_divergence(DIVERGENCE_FACTOR * uniform, 7, 5)
    with pytest.raises(TrainingError, match=r"^Training diverged at step 7: the loss per token is .*, over 10x that of "
                       r"a uniform guess over the vocabulary \(.*\); lower optimizer.learn_rate \(now 0.5\) or "
                       r"training.grad_clip and start again \(the last checkpoint is from step 5\)$"):
        loop._check_divergence(DIVERGENCE_FACTOR * uniform * 1.01, 7, 5)


@pytest.mark.parametrize("weight", [math.nan, math.inf], ids=["NaN", "infinity"])
def test_weights_that_are_not_finite_stop_the_run_and_say_nothing_was_saved(tmp_path, weight):
    loop = _loop(tmp_path, weight=weight)
    loop.progress.step = 3
    with pytest.raises(TrainingError, match=r"^The biLM's weights are not finite \(NaN or infinity\) at step 3, so "
                       r"they were not saved; .* \(no checkpoint was saved\)$"):
        loop._check_weights(0)


def test_skipped_steps_are_warned_of_and_stop_the_run_at_the_limit_in_a_row(tmp_path, capsys):
    loop = _loop(tmp_path, training__max_nonfinite_steps=3)
    loop._non_finite(0, [(4, 1), (5, 2)])
    with pytest.raises(TrainingError, match=r"^The loss or gradient was not finite for 3 steps in a row \(last at step "
                       r"6\); .* --resume continues from the last checkpoint$"):
        loop._non_finite(0, [(6, 3), (7, 4)])
    warnings = capsys.readouterr().err.splitlines()
    assert warnings == [f"⚠ step {step}: non-finite loss or gradient, step skipped ({step - 3} in a row)"
                        for step in (4, 5, 6)]


def test_an_interrupted_run_says_where_resume_continues_or_that_nothing_is_kept(tmp_path, capsys):
    loop = _loop(tmp_path)
    loop.progress.step = 8
    loop._say_interrupted(0)
    assert "Interrupted at step 8, before the first checkpoint: nothing to resume" in capsys.readouterr().err
    loop.directory.checkpoint.write_bytes(b"")
    loop._say_interrupted(5)
    assert capsys.readouterr().err == "⚠ Interrupted at step 8; --resume continues from step 5\n"


def test_the_training_tokens_come_from_the_corpus_statistics(tmp_path):
    assert _loop(tmp_path).n_train_tokens is None
    assert _loop(tmp_path, stats={"n_tokens": 1234}).n_train_tokens == 1234


def test_the_held_out_line_gives_each_perplexity_to_two_decimals():
    result = {"dev_perplexity": 12.346, "dev_perplexity_forward": 10.0, "dev_perplexity_backward": 14.691}
    assert _dev_line(3, result) == "step 3: held-out perplexity 12.35 (forward 10.00, backward 14.69)"
