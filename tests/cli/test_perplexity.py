"""`spacy-elmo perplexity RUN TEXT`: one line of figures, or one line of error."""
from spacy_elmo.pretraining.run import pretrain

from ..conftest import run_cli
from ..pretraining.util import fast_config


def test_perplexity_prints_the_figures(tmp_path, reference_dir, capsys, monkeypatch, one_torch_thread):
    text = reference_dir / "bilm-tf" / "train" / "data.txt"
    pretrain(fast_config(text, text, training__max_steps=5), tmp_path / "run")
    code, out, err = run_cli(capsys, monkeypatch, "perplexity", tmp_path / "run", text, "--unigram")
    assert code == 0, err
    assert "14 sentences, 148 predictions: perplexity" in out and "unigram baseline" in out
    code, out, err = run_cli(capsys, monkeypatch, "perplexity", tmp_path / "run", tmp_path / "missing.txt")
    assert code == 1 and "missing.txt" in err and "Traceback" not in err


def test_a_shipped_model_is_scored_by_name(tmp_path, capsys, monkeypatch, one_torch_thread):
    """english-compact comes with its softmax and vocabulary; its text is read as it was trained
    (spaCy's English tokenizer, sentence splitting), with `load_bilm`'s name resolution."""
    text = tmp_path / "dev.txt"
    text.write_text("I sat on the bank of the river. It was muddy.\n", encoding="utf8")
    code, out, err = run_cli(capsys, monkeypatch, "perplexity", "english-compact", text)
    assert code == 0, err
    assert "✔ 2 sentences, 15 predictions: perplexity" in " ".join(out.split())
