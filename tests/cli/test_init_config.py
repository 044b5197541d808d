"""`spacy-elmo init-config`: the commented default pretraining config, to a file or stdout."""
import pytest

from spacy_elmo.pretraining.config import load_config
from spacy_elmo.pretraining.default_config import default_config_text

from ..conftest import run_cli


def test_init_config_writes_a_valid_commented_config(tmp_path, capsys, monkeypatch):
    path = tmp_path / "pretrain.cfg"
    code, out, _ = run_cli(capsys, monkeypatch, "init-config", path, "--size", "tiny", "--lang", "whitespace")
    assert code == 0 and "Saved the pretraining config" in out
    text = path.read_text(encoding="utf8")
    assert text.count("\n# ") > 30
    config = load_config(path, {"paths.train": "t.txt"})
    assert config.model.size == "tiny" and config.corpus.tokenizer == "whitespace"
    code, out, _ = run_cli(capsys, monkeypatch, "init-config", "-")
    assert code == 0 and out.startswith("# spacy-elmo biLM pretraining") and 'size = "small"' in out
    code, out, err = run_cli(capsys, monkeypatch, "init-config", tmp_path / "x.cfg", "--size", "huge")
    assert code == 1 and "unknown model size 'huge'" in out + err
    code, out, err = run_cli(capsys, monkeypatch, "init-config", tmp_path / "zz.cfg", "--lang", "zz")
    assert code == 1 and "corpus.tokenizer = 'zz': not a spaCy language code" in out + err
    assert not (tmp_path / "zz.cfg").exists()


def test_init_config_prints_the_next_command_on_one_line_to_paste(tmp_path, capsys, monkeypatch):
    path = tmp_path / "a_config_file_with_a_name_long_enough_to_be_wrapped_at_eighty_columns.cfg"
    code, out, _ = run_cli(capsys, monkeypatch, "init-config", path)
    assert code == 0
    command = f"python -m spacy_elmo pretrain {path} OUTPUT_DIR --paths.train TEXT --paths.dev HELD_OUT"
    assert out.splitlines()[-1] == command


def test_init_config_to_stdout_prints_the_default_config_exactly_and_writes_no_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, monkeypatch, "init-config", "-", "--size", "compact", "--lang", "de")
    assert (code, out, err) == (0, default_config_text(size="compact", lang="de"), "")
    assert list(tmp_path.iterdir()) == []


def test_a_language_whose_tokenizer_needs_another_package_says_so(tmp_path, capsys, monkeypatch):
    """Japanese is a spaCy language code; its tokenizer needs SudachiPy, not installed with spacy-elmo."""
    try:
        import sudachipy  # noqa: F401
        pytest.skip("SudachiPy is installed here")
    except ImportError:
        pass
    code, out, err = run_cli(capsys, monkeypatch, "init-config", "-", "--lang", "ja")
    message = " ".join((out + err).split())
    assert code == 1 and "corpus.tokenizer = 'ja': spaCy's 'ja' tokenizer needs a package that is not installed" in message
    assert "not a spaCy language code" not in message and "Traceback" not in message
