"""The biLM's two directions on their own threads: results in order, modes carried over,
torch's thread count halved and restored, and a forked child starting single-threaded."""
import os
import select
import signal
import threading

import pytest
import torch

from spacy_elmo.models.pytorch.lstm import threads
from spacy_elmo.models.pytorch.lstm.threads import run_directions_in_threads


@pytest.fixture()
def four_torch_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(4)
    yield
    torch.set_num_threads(before)


def test_the_results_are_those_of_direction_0_then_direction_1():
    assert run_directions_in_threads(lambda direction: f"direction {direction}") == ("direction 0", "direction 1")


def test_both_directions_run_at_once_on_threads_other_than_the_callers():
    both_running = threading.Barrier(2, timeout=30)  # one at a time: BrokenBarrierError

    def run(direction):
        both_running.wait()
        return threading.current_thread()

    first, second = run_directions_in_threads(run)
    assert first is not second and threading.current_thread() not in (first, second)


def test_each_direction_gets_half_the_torch_threads_and_the_caller_gets_them_back(four_torch_threads):
    assert run_directions_in_threads(lambda direction: torch.get_num_threads()) == (2, 2)
    assert torch.get_num_threads() == 4


def test_an_error_in_a_direction_reaches_the_caller_with_its_threads_restored(four_torch_threads):
    def run(direction):
        if direction == 1:
            raise ValueError("backward failed")
        return direction

    with pytest.raises(ValueError, match="backward failed"):
        run_directions_in_threads(run)
    assert torch.get_num_threads() == 4


def _modes(direction):
    return (torch.is_grad_enabled(), torch.is_inference_mode_enabled(),
            torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))


def test_grad_inference_and_autocast_modes_are_those_of_the_caller():
    with torch.no_grad():
        assert run_directions_in_threads(_modes)[1][0] is False
    with torch.inference_mode():
        assert run_directions_in_threads(_modes)[0][:2] == (False, True)
    with torch.autocast("cpu", dtype=torch.float16):
        assert run_directions_in_threads(_modes) == ((True, False, True, torch.float16),) * 2
    assert run_directions_in_threads(_modes)[0][:3] == (True, False, False)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_has_a_new_pool_and_one_torch_thread(four_torch_threads):
    run_directions_in_threads(lambda direction: direction)  # the parent's pool has started
    parent_pool = threads._POOL
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running pytest's teardown
        try:
            report = f"{threads._POOL is None} {torch.get_num_threads()} {run_directions_in_threads(str)}"
            os.write(write, report.encode())
        finally:
            os._exit(0)
    os.close(write)
    if not select.select([read], [], [], 60)[0]:  # the child hangs: the bug this guards against
        os.kill(pid, signal.SIGKILL)
    with os.fdopen(read) as reader:
        report = reader.read()
    os.waitpid(pid, 0)
    assert report == "True 1 ('0', '1')"
    assert threads._POOL is parent_pool and torch.get_num_threads() == 4
