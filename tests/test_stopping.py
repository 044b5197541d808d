"""SIGTERM stops a command as Ctrl-C does, and a stop request is not lost."""
import os
import signal
import time

import pytest

from spacy_elmo.stopping import raise_if_terminated, stopping_on_sigterm


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
