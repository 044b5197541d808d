"""End-to-end pretraining runs on a tiny corpus (fixture-size biLM, one process, CPU)."""
import dataclasses
import json
import math
import shutil
import time
from pathlib import Path

import h5py
import numpy
import pytest
import torch

from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.output_files import _host
from spacy_elmo.models.pytorch.options import NAMED_SIZES, BiLMOptions
from spacy_elmo.models.pytorch.original_format import load_bilm
from spacy_elmo.pretraining.checkpoint import load_checkpoint
from spacy_elmo.pretraining.config import load_config
from spacy_elmo.errors import CheckpointError, ConfigError, TrainingError
from spacy_elmo.pretraining.metrics import MetricsLog
from spacy_elmo.pretraining.assembly import assemble_model
from spacy_elmo.pretraining.batch_stream import BatchStream
from spacy_elmo.pretraining.run import pretrain
from spacy_elmo.pretraining.trainer import Trainer

from .util import fast_config, kill_at_step

TIMING = ("elapsed_seconds", "tokens_per_second")


def _records(output_dir: Path, kind: str):
    records = MetricsLog(output_dir / "metrics.jsonl").read()
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records if r["kind"] == kind]


def _checkpoint_model(output_dir: Path):
    state = load_checkpoint(output_dir / "checkpoint.pt")
    vocab_size = state["model"]["softmax.weight"].shape[0]
    return assemble_model(vocab_size, options=BiLMOptions.from_dict(state["options"]), state=state["model"]).eval()


@pytest.fixture(scope="module")
def trained(tmp_path_factory, reference_dir):
    """300 steps on bilm-tf's training smoke-test corpus, evaluated on the same text."""
    text = reference_dir / "bilm-tf" / "train" / "data.txt"
    output_dir = tmp_path_factory.mktemp("run") / "out"
    config = fast_config(
        text, text, training__max_steps=300, training__log_every=50, training__eval_every=150,
        training__checkpoint_every=150, training__eval_at_start=True,
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        summary = pretrain(config, output_dir)
    finally:
        torch.set_num_threads(threads)
    return output_dir, summary, text


def test_a_few_hundred_steps_lower_the_loss(trained):
    output_dir, summary, _ = trained
    dev = _records(output_dir, "dev")
    train = _records(output_dir, "train")
    assert [r["step"] for r in dev] == [0, 150, 300] and [r["step"] for r in train] == [50, 100, 150, 200, 250, 300]
    start, end = dev[0], dev[-1]
    assert start["dev_perplexity"] > 40  # about the vocabulary size (80 words) at random
    assert end["dev_perplexity"] < start["dev_perplexity"] / 3
    assert train[-1]["train_loss"] < train[0]["train_loss"] - 0.5
    for record in dev:
        expected = (record["dev_perplexity_forward"] + record["dev_perplexity_backward"]) / 2
        assert record["dev_perplexity"] == pytest.approx(expected)
    assert summary["step"] == 300 and summary["dev_perplexity"] == pytest.approx(end["dev_perplexity"])
    stats = json.loads((output_dir / "corpus_stats.json").read_text())
    assert end["dev_perplexity"] < stats["dev_unigram_perplexity"] < start["dev_perplexity"]


def test_output_directory_layout(trained):
    output_dir, _, _ = trained
    names = {p.name for p in output_dir.iterdir()}
    assert {
        "options.json", "weights.hdf5", "softmax.hdf5", "vocab.txt", "config.cfg", "metrics.jsonl",
        "perplexity.png", "checkpoint.pt", "corpus_stats.json",
    } <= names
    assert not [n for n in names if n.endswith(".tmp")]
    vocab = (output_dir / "vocab.txt").read_text(encoding="utf8").splitlines()
    assert vocab[:5] == ["<S>", "</S>", "<UNK>", "of", "the"] and len(vocab) == 80
    assert (output_dir / "perplexity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    stats = json.loads((output_dir / "corpus_stats.json").read_text())
    assert stats["n_words"] == 134 and stats["n_tokens"] == stats["n_words"] + stats["n_sentences"]
    config = load_config(output_dir / "config.cfg")
    assert config.training.max_steps == 300 and config.corpus.tokenizer == "whitespace"
    with h5py.File(output_dir / "softmax.hdf5", "r") as handle:
        assert handle["softmax/W"].shape == (80, 16) and handle["softmax/b"].shape == (80,)


def test_exported_weights_give_the_trainer_s_vectors(trained, reference_dir):
    output_dir, _, _ = trained
    sentences = [s.split() for group in json.loads((reference_dir / "allennlp" / "sentences.json").read_text()) for s in group]
    char_ids = batch_to_char_ids(sentences[:8])
    with torch.no_grad():
        expected = _checkpoint_model(output_dir).bilm(char_ids).layers
        exported = load_bilm(output_dir).eval()(char_ids).layers
    assert torch.equal(exported, expected)
    options = json.loads((output_dir / "options.json").read_text())
    assert options["lstm"]["use_skip_connections"] is True and options["char_cnn"]["n_characters"] == 262


def test_the_elmo_component_loads_the_exported_model(trained):
    output_dir, _, _ = trained
    spacy = pytest.importorskip("spacy")
    pytest.importorskip("spacy_elmo.pipeline.elmo")
    from spacy.util import registry

    nlp = spacy.blank("en")
    if "elmo" not in registry.factories:
        pytest.skip("the elmo factory is not registered (reinstall the package)")
    nlp.add_pipe("elmo", config={"doc_tensor": None})
    # what a training config's [initialize.components.elmo] with paths.elmo_model does
    nlp.config["initialize"]["components"]["elmo"] = {
        "weights_loader": {"@misc": "spacy-elmo.original_weights.v1", "path": str(output_dir)}
    }
    nlp.initialize()
    text = "neural networks make use of neural networks ."
    doc = nlp(text)
    with torch.no_grad():
        expected = _checkpoint_model(output_dir).bilm(batch_to_char_ids([text.split()])).layers[0]
    numpy.testing.assert_allclose(doc._.elmo.layers, expected.numpy(), rtol=0, atol=1e-6)


def test_init_from_a_trained_run_continues_its_vocabulary_and_softmax(trained, tmp_path):
    output_dir, summary, text = trained
    config = fast_config(text, text, training__max_steps=2, training__eval_at_start=True)
    pretrain(config, tmp_path / "more", init_from=output_dir)
    first = _records(tmp_path / "more", "dev")[0]
    assert first["step"] == 0
    assert first["dev_perplexity"] == pytest.approx(summary["dev_perplexity"], rel=1e-5)
    assert (tmp_path / "more" / "vocab.txt").read_text() == (output_dir / "vocab.txt").read_text()


def test_init_from_with_another_lstm_or_projection_dim_is_refused(trained, tmp_path):
    output_dir, _, text = trained
    own = load_bilm(output_dir).options
    for size, value in (("lstm_dim", own.lstm_dim + 8), ("projection_dim", own.projection_dim - 1)):
        config = fast_config(text, **{f"model__{size}": value})
        with pytest.raises(ConfigError, match=f"model.{size} is {value}, .*continues a biLM at its own sizes"):
            pretrain(config, tmp_path / "other", init_from=output_dir)
        assert not (tmp_path / "other" / "weights.hdf5").exists()


def test_init_from_a_published_model(tmp_path, allennlp_model_dir, tiny_text):
    published = tmp_path / "published"
    published.mkdir()
    shutil.copy(allennlp_model_dir / "options.json", published / "options.json")
    shutil.copy(allennlp_model_dir / "lm_weights.hdf5", published / "lm_weights.hdf5")
    config = fast_config(
        tiny_text, model__size="small", optimizer__name="adam", optimizer__learn_rate=1e-9, training__max_steps=3
    )
    pretrain(config, tmp_path / "out", init_from=published / "lm_weights.hdf5")
    reference = load_bilm(published / "lm_weights.hdf5")
    adapted = load_bilm(tmp_path / "out")
    assert adapted.options == reference.options  # sizes come from the model, not [model]
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(adapted.state_dict()[name], value, rtol=0, atol=1e-6)
    assert (tmp_path / "out" / "vocab.txt").read_text().startswith("<S>\n</S>\n<UNK>\n")


@pytest.mark.slow
@pytest.mark.parametrize("log_every", [1, 3])
def test_resume_after_a_kill_repeats_the_uninterrupted_run(tmp_path, tiny_text, monkeypatch, log_every):
    settings = dict(
        softmax__kind="sampled", softmax__n_negative_samples=20, optimizer__name="adam",
        optimizer__learn_rate=0.01, optimizer__warmup_steps=3, optimizer__anneal_steps=4,
        training__dropout=0.2, training__max_steps=12, training__checkpoint_every=5, training__log_every=log_every,
    )
    pretrain(fast_config(tiny_text, **settings), tmp_path / "straight")

    original_step = kill_at_step(monkeypatch, 8)
    with pytest.raises(KeyboardInterrupt):
        pretrain(fast_config(tiny_text, **settings), tmp_path / "resumed")
    assert load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")["step"] == 5
    monkeypatch.setattr(Trainer, "step", original_step)
    pretrain(fast_config(tiny_text, **settings), tmp_path / "resumed", resume=True)

    expected = _records(tmp_path / "straight", "train")
    assert len(expected) == 12 // log_every
    # The schedule: warm-up over steps 1-3, then 0.01, then down to 0.001 at step 12.
    rates = {r["step"]: r["learn_rate"] for r in expected}
    assert rates[3] == pytest.approx(0.01) and rates[12] == pytest.approx(0.001)
    if log_every == 1:
        assert rates[1] == pytest.approx(0.01 / 3) and rates[6] == pytest.approx(0.01)
    assert _records(tmp_path / "resumed", "train") == expected
    with h5py.File(tmp_path / "straight" / "weights.hdf5", "r") as a, h5py.File(tmp_path / "resumed" / "weights.hdf5", "r") as b:
        names = []
        a.visit(lambda name: names.append(name) if isinstance(a[name], h5py.Dataset) else None)
        for name in names:
            numpy.testing.assert_array_equal(a[name][...], b[name][...])


def test_max_epochs_sets_the_number_of_steps(tmp_path, tiny_text):
    config = fast_config(tiny_text, training__max_steps=None, training__max_epochs=2, training__log_every=1000)
    summary = pretrain(config, tmp_path / "out")
    stats = json.loads((tmp_path / "out" / "corpus_stats.json").read_text())
    assert summary["step"] == math.ceil(2 * stats["n_tokens"] / 48)


def test_bf16_autocast_runs_on_cpu(tmp_path, tiny_text):
    losses = {}
    for precision in ("fp32", "bf16"):
        pretrain(fast_config(tiny_text, training__precision=precision, training__max_steps=4), tmp_path / precision)
        losses[precision] = [r["train_loss"] for r in _records(tmp_path / precision, "train")]
    assert len(losses["bf16"]) == 4 and all(math.isfinite(loss) for loss in losses["bf16"])
    # bf16 keeps 8 significant bits (relative rounding 2**-8 = 0.4%) in the autocast matmuls;
    # over 4 steps the losses stay within 1% of fp32 (0.2% measured).
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=1e-2)
    assert losses["bf16"] != losses["fp32"]  # autocast did run in bf16


def test_non_finite_losses_are_skipped_then_stop_the_run(tmp_path, tiny_text, capsys):
    # The scaled loss overflows a float32: every gradient is infinite, every step skipped.
    config = fast_config(tiny_text, training__gradient_scale=3e38, training__max_nonfinite_steps=3, training__max_steps=20)
    with pytest.raises(TrainingError, match="not finite for 3 steps in a row"):
        pretrain(config, tmp_path / "out")
    skipped = [line for line in capsys.readouterr().err.splitlines() if "non-finite" in line]
    assert skipped == [f"⚠ step {n}: non-finite loss or gradient, step skipped ({n} in a row)" for n in (1, 2, 3)]


def test_non_finite_steps_between_log_lines_are_found_at_the_next_one(tmp_path, tiny_text, capsys):
    """Steps do not wait for the device: their figures are read at log lines and checkpoints,
    so the run stops at step 5's log line and names the step that made it stop."""
    config = fast_config(
        tiny_text, training__gradient_scale=3e38, training__max_nonfinite_steps=3, training__max_steps=20,
        training__log_every=5,
    )
    with pytest.raises(TrainingError, match=r"not finite for 3 steps in a row \(last at step 3\)"):
        pretrain(config, tmp_path / "out")
    warnings = [line for line in capsys.readouterr().err.splitlines() if "non-finite" in line]
    assert warnings == [f"⚠ step {n}: non-finite loss or gradient, step skipped ({n} in a row)" for n in (1, 2, 3)]


def test_existing_runs_and_checkpoints_errors(tmp_path, tiny_text):
    output_dir = tmp_path / "out"
    with pytest.raises(CheckpointError, match="No checkpoint at"):
        pretrain(fast_config(tiny_text), output_dir, resume=True)
    pretrain(fast_config(tiny_text, training__max_steps=2), output_dir)
    with pytest.raises(TrainingError, match="already holds a training run; pass --resume"):
        pretrain(fast_config(tiny_text), output_dir)
    with pytest.raises(ConfigError, match=r"--resume: the config's \[model\] differ"):
        pretrain(fast_config(tiny_text, model__lstm_dim=32), output_dir, resume=True)
    checkpoint = output_dir / "checkpoint.pt"
    data = checkpoint.read_bytes()
    state = torch.load(checkpoint, weights_only=True)
    for step in ("2", -1):
        torch.save({**state, "step": step}, checkpoint)
        with pytest.raises(CheckpointError, match=rf"damaged checkpoint \(its step is {step!r}"):
            pretrain(fast_config(tiny_text), output_dir, resume=True)
    checkpoint.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"checkpoint.pt: corrupt or unreadable checkpoint"):
        pretrain(fast_config(tiny_text), output_dir, resume=True)
    checkpoint.write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match=r"checkpoint.pt: corrupt or unreadable checkpoint"):
        pretrain(fast_config(tiny_text), output_dir, resume=True)


def test_bad_corpus_paths_and_empty_corpora(tmp_path, tiny_text):
    from spacy_elmo.errors import InputError

    with pytest.raises(InputError, match=r"corpus.train: corpus path not found: .*nope.txt"):
        pretrain(fast_config(tmp_path / "nope.txt"), tmp_path / "out")
    with pytest.raises(InputError, match=r"corpus.dev: corpus path not found"):
        pretrain(fast_config(tiny_text, tmp_path / "nodev.txt"), tmp_path / "out")
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf8")
    with pytest.raises(TrainingError, match=r"corpus.train: no sentences in .*empty.txt \(empty corpus\)"):
        pretrain(fast_config(tmp_path / "empty.txt"), tmp_path / "out")
    with pytest.raises(TrainingError, match=r"corpus.dev: no sentences in .*empty.txt"):
        pretrain(fast_config(tiny_text, tmp_path / "empty.txt"), tmp_path / "out2")


def test_a_diverging_run_saturates_its_perplexities_and_stops(tmp_path, tiny_text):
    config = fast_config(
        tiny_text, tiny_text, optimizer__name="adam", optimizer__learn_rate=1e6, training__max_steps=30,
        training__log_every=4, training__eval_every=2,
    )
    with pytest.raises(TrainingError, match=r"Training diverged at step 4: the loss per token is .*lower optimizer.learn_rate \(now 1e\+06\)"):
        pretrain(config, tmp_path / "out")
    dev = _records(tmp_path / "out", "dev")
    assert dev and dev[-1]["step"] == 2
    assert math.isinf(dev[-1]["dev_perplexity_forward"]) and math.isinf(dev[-1]["dev_perplexity"])
    assert not (tmp_path / "out" / "weights.hdf5").exists()  # nothing diverged is exported


def test_resume_refuses_another_corpus_or_a_step_limit_already_passed(tmp_path, tiny_text):
    output_dir = tmp_path / "out"
    pretrain(fast_config(tiny_text, training__max_steps=6, training__checkpoint_every=6), output_dir)
    other = tmp_path / "other.txt"
    other.write_text(tiny_text.read_text(encoding="utf8"), encoding="utf8")
    with pytest.raises(ConfigError, match=r"--resume: the training files \(corpus.train = .*other.txt\) are not those the run in .* was trained on, .*data.txt deleted, .*other.txt new"):
        pretrain(fast_config(other, training__max_steps=10), output_dir, resume=True)
    with pytest.raises(ConfigError, match=r"--resume: the run in .* is at step 6, past training.max_steps \(4\)"):
        pretrain(fast_config(tiny_text, training__max_steps=4), output_dir, resume=True)
    # The same corpus through another spelling of its path resumes.
    link = tmp_path / "link.txt"
    link.symlink_to(tiny_text)
    assert pretrain(fast_config(link, training__max_steps=8), output_dir, resume=True)["step"] == 8


def test_resume_accepts_the_same_model_spelled_out_and_older_checkpoints(tmp_path, tiny_text):
    output_dir = tmp_path / "out"
    pretrain(fast_config(tiny_text, training__max_steps=2, training__checkpoint_every=2), output_dir)
    fixture = NAMED_SIZES["tiny"]
    spelled_out = {
        "model__size": "small", "model__lstm_dim": fixture.lstm_dim, "model__projection_dim": fixture.projection_dim,
        "model__n_layers": fixture.n_layers, "model__n_highway": fixture.n_highway,
        "model__char_embedding_dim": fixture.char_embedding_dim, "model__filters": [list(f) for f in fixture.filters],
        "model__cell_clip": fixture.cell_clip, "model__proj_clip": fixture.proj_clip,
        "model__use_skip_connections": fixture.use_skip_connections,
    }
    assert pretrain(fast_config(tiny_text, training__max_steps=3, **spelled_out), output_dir, resume=True)["step"] == 3
    # A checkpoint that stored [model] as written (size name and overrides) still resumes.
    checkpoint_path = output_dir / "checkpoint.pt"
    checkpoint = torch.load(checkpoint_path, weights_only=False)
    checkpoint["sections"]["model"] = dataclasses.asdict(fast_config(tiny_text).model)
    torch.save(checkpoint, checkpoint_path)
    assert pretrain(fast_config(tiny_text, training__max_steps=4), output_dir, resume=True)["step"] == 4


def test_starting_or_resuming_removes_stale_temp_files(tmp_path, tiny_text, dead_pid):
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    stale = [output_dir / f".{name}.spacy-elmo-{dead_pid}@{_host()}-x1y2z3w4.tmp" for name in ("checkpoint.pt", "weights.hdf5")]
    users = output_dir / f".mydata.spacy-elmo-{dead_pid}@{_host()}-x1y2z3w4.tmp"  # not an output of the run
    for path in [*stale, users]:
        path.write_bytes(b"left by a killed run")
    pretrain(fast_config(tiny_text, training__max_steps=2, training__checkpoint_every=2), output_dir)
    assert not any(path.exists() for path in stale) and users.exists()
    for path in stale:
        path.write_bytes(b"left by a killed run")
    pretrain(fast_config(tiny_text, training__max_steps=3), output_dir, resume=True)
    assert not any(path.exists() for path in stale)
    assert list(output_dir.glob(".*.tmp")) == [users]


def test_an_output_directory_that_is_a_file_is_refused(tmp_path, tiny_text):
    from spacy_elmo.errors import SpacyElmoError

    (tmp_path / "out").write_text("not a directory")
    with pytest.raises(SpacyElmoError, match=r"Output directory .*out is a file, not a directory"):
        pretrain(fast_config(tiny_text), tmp_path / "out")
    with pytest.raises(SpacyElmoError, match=r"Output directory .*out/run: .*out is a file, not a directory"):
        pretrain(fast_config(tiny_text), tmp_path / "out" / "run")
    assert (tmp_path / "out").read_text() == "not a directory"


def test_a_run_stopped_before_its_first_checkpoint_says_so_and_starts_afresh(tmp_path, tiny_text, monkeypatch, capsys):
    settings = dict(training__max_steps=6, training__checkpoint_every=5, training__log_every=1)
    original_step = kill_at_step(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        pretrain(fast_config(tiny_text, **settings), tmp_path / "out")
    assert "before the first checkpoint: nothing to resume" in capsys.readouterr().err
    assert len(_records(tmp_path / "out", "train")) == 2
    monkeypatch.setattr(Trainer, "step", original_step)
    pretrain(fast_config(tiny_text, **settings), tmp_path / "out")  # the same command again
    assert [r["step"] for r in _records(tmp_path / "out", "train")] == [1, 2, 3, 4, 5, 6]


def _poison_weights_at_step(monkeypatch, n: int) -> None:
    """Make the n-th training step (itself finite) leave a NaN in the biLM's weights."""
    calls = {"n": 0}
    original_step = Trainer.step

    def poisoned(self, batch):
        result = original_step(self, batch)
        calls["n"] += 1
        if calls["n"] == n:
            with torch.no_grad():
                next(self.model.parameters()).fill_(math.nan)
        return result

    monkeypatch.setattr(Trainer, "step", poisoned)


def test_weights_that_are_not_finite_stop_the_run_at_the_next_checkpoint_and_are_never_saved(
    tmp_path, tiny_text, monkeypatch
):
    output_dir = tmp_path / "out"
    _poison_weights_at_step(monkeypatch, 3)
    config = fast_config(tiny_text, training__max_steps=5, training__checkpoint_every=1)
    with pytest.raises(TrainingError, match=(
        r"^The biLM's weights are not finite \(NaN or infinity\) at step 3, so they were not saved; lower "
        r"optimizer.learn_rate \(now 0.2\) or training.grad_clip and start again \(the last checkpoint is from step 2\)$"
    )):
        pretrain(config, output_dir)
    assert load_checkpoint(output_dir / "checkpoint.pt")["step"] == 2
    weights = load_bilm(output_dir / "weights.hdf5")
    assert all(torch.isfinite(p).all() for p in weights.parameters())


def test_weights_that_are_not_finite_stop_the_run_at_its_next_non_finite_loss(tmp_path, tiny_text, monkeypatch):
    """Skipping steps cannot repair them: the run stops at once, not after training.max_nonfinite_steps."""
    _poison_weights_at_step(monkeypatch, 1)
    config = fast_config(tiny_text, training__max_steps=20, training__max_nonfinite_steps=5)
    with pytest.raises(TrainingError, match=r"weights are not finite \(NaN or infinity\) at step 2, .*\(no checkpoint was saved\)$"):
        pretrain(config, tmp_path / "out")
    assert not (tmp_path / "out" / "weights.hdf5").exists() and not (tmp_path / "out" / "checkpoint.pt").exists()


@pytest.mark.parametrize("resumed", [False, True], ids=["a new run", "a resumed run"])
def test_a_run_stopped_before_its_first_step_removes_what_it_began_and_never_the_run_it_resumed(
    tmp_path, tiny_text, monkeypatch, resumed
):
    output_dir = tmp_path / "out"
    if resumed:
        pretrain(fast_config(tiny_text, training__max_steps=2, training__checkpoint_every=2), output_dir)
    before = {path.name: path.read_bytes() for path in output_dir.iterdir() if path.is_file()} if resumed else {}
    kill_at_step(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        pretrain(fast_config(tiny_text, training__max_steps=4), output_dir, resume=resumed)
    if not resumed:
        assert not output_dir.exists()
    else:
        after = {path.name: path.read_bytes() for path in output_dir.iterdir() if path.is_file()}
        del before["config.cfg"], after["config.cfg"]  # a resumed run saves its own settings as it starts
        assert after == before and (output_dir / "tokenized").is_dir()


def test_a_stopped_run_waits_for_the_batches_drawn_in_the_background_before_it_cleans_up(tmp_path, tiny_text, monkeypatch):
    """The draw in flight reads (and tokenizes into the run's folder) the training text: a run
    stopped meanwhile removes what it began only once that draw has ended."""
    draw = BatchStream._draw_batches

    def slow_draw(self):
        time.sleep(0.3)
        return draw(self)

    monkeypatch.setattr(BatchStream, "_draw_batches", slow_draw)
    kill_at_step(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        pretrain(fast_config(tiny_text, training__max_steps=4), tmp_path / "out")
    time.sleep(0.5)  # anything still running in the background has written by now
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("setting", ["train", "dev"])
@pytest.mark.parametrize("where", ["is", "is inside", "holds"])
def test_an_output_directory_overlapping_a_corpus_directory_is_refused_before_anything_is_written(
    tmp_path, tiny_text, setting, where
):
    from spacy_elmo.errors import SpacyElmoError

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(tiny_text, corpus / "data.txt")
    output_dir = {"is": corpus, "is inside": corpus / "run", "holds": tmp_path}[where]
    paths = {"train": corpus, "dev": tiny_text} if setting == "train" else {"train": tiny_text, "dev": corpus}
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(SpacyElmoError, match=(
        rf"^Output directory {output_dir} {where} corpus.{setting} \({corpus}\): its outputs would be read as "
        rf"corpus.{setting} next time; choose an output directory apart from it$"
    )):
        pretrain(fast_config(paths["train"], paths["dev"]), output_dir)
    assert sorted(tmp_path.rglob("*")) == before


def test_init_from_a_name_continues_the_softmax_and_vocabulary_of_its_package(tmp_path, tiny_text, capsys):
    """english-compact's biLM is in spacy-elmo, its softmax and vocabulary in english-compact-lm."""
    from spacy_elmo.named_models import language_model_folder

    config = fast_config(tiny_text, optimizer__name="adam", optimizer__learn_rate=1e-9, training__max_steps=1)
    pretrain(config, tmp_path / "out", init_from="english-compact")
    package = language_model_folder("english-compact")
    assert "(biLM and softmax)" in " ".join(capsys.readouterr().out.split())  # wasabi wraps lines
    assert (tmp_path / "out" / "vocab.txt").read_bytes() == (package / "vocab.txt").read_bytes()


def test_init_from_a_model_pretraining_cannot_continue_is_refused_before_anything_is_written(tmp_path, tiny_text):
    folder = Path(__file__).resolve().parents[1] / "fixtures" / "elmoformanylangs" / "char_only"
    with pytest.raises(ConfigError, match="an ELMoForManyLangs model cannot be trained here; pretraining reads UTF-8"):
        pretrain(fast_config(tiny_text), tmp_path / "out", init_from=folder)
    assert not (tmp_path / "out").exists()


def test_init_from_the_output_directory_is_refused_and_its_model_kept(trained, tmp_path):
    output_dir, _, text = trained
    model = tmp_path / "model"
    model.mkdir()
    for name in ("options.json", "weights.hdf5"):
        shutil.copy(output_dir / name, model / name)
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    with pytest.raises(ConfigError, match="holds the --init-from model .*would be overwritten"):
        pretrain(fast_config(text), model, init_from=model)
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before
