"""`spacy-elmo inspect PIPELINE`: the learned layer weights of each component."""
from pathlib import Path
from typing import Tuple

import numpy
import pytest
import spacy


from spacy_elmo.cli.inspect import layer_mixes

from ..conftest import run_cli
from ..pipeline.util import elmo_nlp, train


@pytest.fixture(scope="module")
def trained_dir(allennlp_model_dir, tmp_path_factory) -> Path:
    nlp = elmo_nlp(allennlp_model_dir / "lm_weights.hdf5", taggers=("tagger",), morphologizer=True)
    train(nlp, 6)
    path = tmp_path_factory.mktemp("inspect") / "pipeline"
    nlp.to_disk(path)
    return path


def run_inspect(capsys, monkeypatch, *args) -> Tuple[int, str, str]:
    return run_cli(capsys, monkeypatch, "inspect", *args)


@pytest.mark.slow
def test_prints_weights_and_gamma_per_component(trained_dir, capsys, monkeypatch):
    code, out, _ = run_inspect(capsys, monkeypatch, trained_dir)
    assert code == 0
    mixes = layer_mixes(spacy.load(trained_dir))
    assert [mix.component for mix in mixes] == ["tagger", "morphologizer"]
    for mix in mixes:
        assert mix.weights.shape == (3,) and mix.weights.sum() == pytest.approx(1.0, abs=1e-5)
        row = next(line for line in out.splitlines() if line.startswith(mix.component))
        assert row.split()[1:] == [f"{w:.3f}" for w in mix.weights] + [f"{mix.gamma:.3f}"]
    assert "tokens" in out and "lstm 2" in out and "gamma" in out


def test_writes_a_png_chart(trained_dir, tmp_path, capsys, monkeypatch):
    chart = tmp_path / "charts" / "mix.png"
    code, out, _ = run_inspect(capsys, monkeypatch, trained_dir, "--png", chart)
    assert code == 0 and "Saved the chart" in out
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list(chart.parent.iterdir()) == [chart]  # no temporary file left


def test_inline_mixes_are_found_after_replace_listeners(trained_dir):
    nlp = spacy.load(trained_dir)
    before = {mix.component: mix.weights for mix in layer_mixes(nlp)}
    nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])
    after = {mix.component: mix.weights for mix in layer_mixes(nlp)}
    numpy.testing.assert_array_equal(after["tagger"], before["tagger"])


def test_errors_are_one_line(tmp_path, capsys, monkeypatch):
    code, out, err = run_inspect(capsys, monkeypatch, tmp_path / "missing")
    assert code == 1 and "Cannot load the pipeline" in err and "Traceback" not in err
    plain = spacy.blank("en")
    plain.add_pipe("sentencizer")
    plain.to_disk(tmp_path / "plain")
    code, out, err = run_inspect(capsys, monkeypatch, tmp_path / "plain")
    assert code == 1 and "mixes ELMo layers" in err


def test_a_truncated_pipeline_is_one_line(trained_dir, tmp_path, capsys, monkeypatch):
    import shutil

    damaged = tmp_path / "damaged"
    shutil.copytree(trained_dir, damaged)
    model = damaged / "elmo" / "model"
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    code, out, err = run_inspect(capsys, monkeypatch, damaged)
    assert code == 1 and "elmo is damaged or incomplete" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_chart_among_the_pipelines_files_is_refused_before_it_loads(trained_dir, capsys, monkeypatch):
    meta = trained_dir / "meta.json"
    before = meta.read_bytes()
    code, out, err = run_inspect(capsys, monkeypatch, trained_dir, "--png", meta)
    assert code == 1 and "is inside the input" in err and "Traceback" not in err
    assert meta.read_bytes() == before
