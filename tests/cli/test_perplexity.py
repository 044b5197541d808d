"""`spacy-elmo perplexity RUN TEXT`: one line of figures, or one line of error."""
import hashlib
import json

import h5py
import numpy

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


def test_a_perplexity_that_is_not_finite_is_an_error(tmp_path, reference_dir, capsys, monkeypatch, one_torch_thread):
    text = reference_dir / "bilm-tf" / "train" / "data.txt"
    pretrain(fast_config(text, text, training__max_steps=2), tmp_path / "run")
    with h5py.File(tmp_path / "run" / "softmax.hdf5", "r+") as handle:
        names = []
        handle.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
        for name in names:
            handle[name][...] = numpy.full(handle[name].shape, 3e38, dtype="f4")
    manifest = json.loads((tmp_path / "run" / "export.json").read_text())  # the change made as a run would
    manifest["sha256"]["softmax.hdf5"] = hashlib.sha256((tmp_path / "run" / "softmax.hdf5").read_bytes()).hexdigest()
    (tmp_path / "run" / "export.json").write_text(json.dumps(manifest))
    code, out, err = run_cli(capsys, monkeypatch, "perplexity", tmp_path / "run", text)
    assert code == 1 and "the perplexity is not finite" in err and "Traceback" not in err
