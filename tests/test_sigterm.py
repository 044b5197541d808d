"""SIGTERM stops a command as Ctrl-C does, a stop request is not lost, and a requested stop waits for the next check."""
import os
import signal
import time

import pytest

from spacy_elmo.sigterm import raise_if_terminated, request_stop, stopping_on_sigterm


def test_sigterm_raises_keyboard_interrupt_inside_and_is_remembered():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="stopped by signal"):
        with stopping_on_sigterm():
            raise_if_terminated()  # nothing requested yet
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler interrupts this at once
    with pytest.raises(KeyboardInterrupt):
        raise_if_terminated()  # the request outlives a swallowed exception
    assert signal.getsignal(signal.SIGTERM) == before
    with stopping_on_sigterm():
        raise_if_terminated()  # a new command starts with no request


def test_a_requested_stop_interrupts_nothing_until_the_next_check():
    with stopping_on_sigterm():
        request_stop(signal.SIGALRM)
        time.sleep(0.01)  # the code running now goes on
        with pytest.raises(KeyboardInterrupt, match=f"stopped by signal {int(signal.SIGALRM)}"):
            raise_if_terminated()
    with stopping_on_sigterm():
        raise_if_terminated()
