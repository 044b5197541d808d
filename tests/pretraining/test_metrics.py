"""The metrics log (`metrics.jsonl`) and its perplexity plot."""
import pytest

from spacy_elmo.errors import SpacyElmoError
from spacy_elmo.figures import agg_pyplot
from spacy_elmo.pretraining import metrics as metrics_module
from spacy_elmo.pretraining.metrics import MetricsLog, plot_perplexity

TRAIN = [{"kind": "train", "step": step, "train_perplexity": 100.0 / step} for step in (1, 2, 3)]
DEV = [{"kind": "dev", "step": 2, "dev_perplexity": 40.0, "dev_perplexity_forward": 39.0,
        "dev_perplexity_backward": 41.0}]


def test_appended_records_read_back_in_order(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl")
    assert log.read() == []
    for record in TRAIN:
        log.append(record)
    assert log.read() == TRAIN


def test_read_skips_lines_that_are_not_the_record_of_a_step(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(
        b'{"step": 1}\n{"step": "2"}\n{"step": true}\n{"step": 2.5}\n{"step": NaN}\n[1, 2]\n{"kind": "train"}\n' + b"[" * 100_000 + b"\n"
        + b'{"step": 3, "note": "\xff"}\n{"step": 4, "tra'
    )
    assert MetricsLog(path).read() == [{"step": 1}, {"step": 3, "note": "\ufffd"}]


def test_truncate_after_keeps_the_records_up_to_the_step(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl")
    for record in TRAIN + DEV:
        log.append(record)
    with log.path.open("a", encoding="utf8") as handle:
        handle.write('{"step": 9, "cut sh')
    log.truncate_after(2)
    assert log.read() == [TRAIN[0], TRAIN[1], DEV[0]]
    assert log.path.read_text(encoding="utf8").count("\n") == 3


def test_truncate_after_refuses_to_replace_a_directory(tmp_path):
    (tmp_path / "metrics.jsonl").mkdir()
    with pytest.raises(SpacyElmoError, match=r"^The metrics log .*metrics.jsonl is a directory, not a regular file: "
                       r"refusing to replace it \(move it out of the run's directory\)$"):
        MetricsLog(tmp_path / "metrics.jsonl").truncate_after(1)


def test_the_plot_is_a_png(tmp_path):
    plot_perplexity(TRAIN + DEV, tmp_path / "perplexity.png", sampled=False)
    assert (tmp_path / "perplexity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("sampled,unigram,labels", [
    (False, None, ["training", "held-out, average", "held-out, forward", "held-out, backward"]),
    (True, 123.4, ["training (sampled softmax)", "held-out, average", "held-out, forward", "held-out, backward",
                   "held-out, unigram (123)"]),
], ids=["full softmax", "sampled softmax with the unigram baseline"])
def test_the_plot_shows_training_held_out_and_the_baseline(tmp_path, monkeypatch, sampled, unigram, labels):
    figures = []
    monkeypatch.setattr(metrics_module, "save_figure", lambda figure, path, dpi: figures.append(figure))
    plot_perplexity(TRAIN + DEV, tmp_path / "perplexity.png", sampled=sampled, unigram=unigram)
    (axes,) = figures[0].axes
    assert [text.get_text() for text in axes.get_legend().get_texts()] == labels
    assert list(axes.lines[0].get_xdata()) == [1, 2, 3] and list(axes.lines[1].get_ydata()) == [40.0]
    assert axes.get_yscale() == "log"
    agg_pyplot().close(figures[0])
