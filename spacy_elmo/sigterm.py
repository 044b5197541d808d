"""Stopping on SIGTERM as on Ctrl-C, so cleanup code runs."""
import contextlib
import signal
from typing import Any, Iterator, Optional

_terminated_by: Optional[int] = None


@contextlib.contextmanager
def stopping_on_sigterm() -> Iterator[None]:
    """Inside, SIGTERM stops the process as Ctrl-C does (KeyboardInterrupt), so that
    `finally` blocks remove temporary files and training says where to resume."""
    global _terminated_by
    _terminated_by = None
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def request_stop(signum: int) -> None:
    """Ask the running loop to stop at its next step, as SIGTERM does, but without
    interrupting the code that runs now (for a deadline: a save is never cut in two)."""
    global _terminated_by
    _terminated_by = signum


def raise_if_terminated() -> None:
    """Raise KeyboardInterrupt if SIGTERM arrived. Python drops an exception that a
    signal handler raises inside a weakref callback or ``__del__``; long loops call
    this so such a stop request is not lost."""
    if _terminated_by is not None:
        raise KeyboardInterrupt(f"stopped by signal {_terminated_by}")


def _on_sigterm(signum: int, frame: Any) -> None:
    global _terminated_by
    _terminated_by = signum
    raise KeyboardInterrupt(f"stopped by signal {signum}")
