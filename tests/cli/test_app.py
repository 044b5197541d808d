"""The `spacy-elmo` command group: `--version`."""
from spacy_elmo import __version__

from ..conftest import run_cli


def test_version_prints_one_line_and_exits(capsys, monkeypatch):
    assert run_cli(capsys, monkeypatch, "--version") == (0, f"spacy-elmo {__version__}\n", "")
