"""Machine-dependent choices: timed once at first use, kept, and forced by the user."""
import types

import pytest

from spacy_elmo.errors import SettingsError
from spacy_elmo.models.pytorch.lstm import tuning


class Clock:
    """The tuning module's clock, moved only by the candidates: timings that never depend on the machine."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


CLOCK = Clock()


@pytest.fixture(autouse=True)
def fresh_decisions(monkeypatch):
    monkeypatch.setattr(tuning, "time", types.SimpleNamespace(perf_counter=CLOCK.perf_counter))
    tuning.forget_decisions()
    yield
    tuning.forget_decisions()


def _candidates(calls):
    def slow():
        calls.append("slow")
        CLOCK.now += 1.0
        return "slow result"

    def quick():
        calls.append("quick")
        CLOCK.now += 0.001
        return "quick result"

    return {"slow": slow, "quick": quick}


def test_the_fastest_is_timed_once_then_kept():
    calls = []
    assert tuning.fastest("kernel", ("shape", 8), _candidates(calls)) == "quick result"
    assert sorted(calls) == ["quick", "quick", "slow", "slow"]  # two rounds of each
    calls.clear()
    assert tuning.fastest("kernel", ("shape", 8), _candidates(calls)) == "quick result"
    assert calls == ["quick"]
    calls.clear()
    tuning.fastest("kernel", ("shape", 16), _candidates(calls))  # another key is timed anew
    assert len(calls) == 4


def test_the_user_forces_a_candidate(monkeypatch):
    calls = []
    monkeypatch.setenv("SPACY_ELMO_KERNEL", "slow")
    assert tuning.fastest("kernel", "key", _candidates(calls)) == "slow result"
    assert calls == ["slow"]
    monkeypatch.setenv("SPACY_ELMO_KERNEL", "auto")
    assert tuning.fastest("kernel", "key", _candidates(calls)) == "quick result"


def test_an_unknown_forced_candidate_is_one_line(monkeypatch):
    monkeypatch.setenv("SPACY_ELMO_KERNEL", "fastest")
    with pytest.raises(SettingsError, match="SPACY_ELMO_KERNEL='fastest': choose one of 'auto', 'slow', 'quick'"):
        tuning.fastest("kernel", "key", _candidates([]))

