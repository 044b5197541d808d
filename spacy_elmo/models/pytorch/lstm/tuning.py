"""Choices that truly depend on the machine: timed once at first use, then kept.

As cuDNN's benchmark mode does: the first call with a given key runs every candidate and keeps the fastest's name for
the process; ``SPACY_ELMO_<CHOICE>`` (e.g. ``SPACY_ELMO_INT8_KERNEL=fbgemm``) forces a candidate instead.
"""
import os
import time
from typing import Callable, Dict, Hashable, Mapping, Optional, Tuple, TypeVar

from ....errors import SettingsError

T = TypeVar("T")

_decisions: Dict[Tuple[str, Hashable], str] = {}


def fastest(choice: str, key: Hashable, candidates: Mapping[str, Callable[[], T]]) -> T:
    """The result of the candidate that is fastest for `key` (timed at its first use).

    :param choice: what is chosen, e.g. ``"int8_kernel"``; names the variable that forces it.
    :param candidates: name -> a call computing the same result in another way.
    """
    decided = _forced_choice(choice, candidates) or _decisions.get((choice, key))
    if decided is not None:
        return candidates[decided]()
    results: Dict[str, T] = {}
    return results[_time(choice, key, candidates, results)]


def _time(choice: str, key: Hashable, candidates: Mapping[str, Callable[[], T]], results: Dict[str, T]) -> str:
    """Run every candidate twice (the first round pays for caches and packing); keep the fastest's name."""
    timings: Dict[str, float] = {}
    for _ in range(2):
        for name, run in candidates.items():
            start = time.perf_counter()
            results[name] = run()
            timings[name] = time.perf_counter() - start
    best = min(timings, key=timings.__getitem__)
    _decisions[(choice, key)] = best
    return best


def _forced_choice(choice: str, candidates: Mapping[str, object]) -> Optional[str]:
    """The candidate ``SPACY_ELMO_<CHOICE>`` names, or ``None`` when it is unset or "auto"."""
    variable = f"SPACY_ELMO_{choice.upper()}"
    value = os.environ.get(variable, "auto").strip().lower()
    if value in ("", "auto"):
        return None
    if value not in candidates:
        raise SettingsError(f"{variable}={value!r}: choose one of 'auto', {', '.join(map(repr, candidates))}")
    return value


def forget_decisions() -> None:
    """Time every choice again at its next use (tests, or after the machine changed)."""
    _decisions.clear()
