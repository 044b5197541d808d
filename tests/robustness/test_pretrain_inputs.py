"""`pretrain` on hostile inputs: one line, exit code 1, no output directory made or changed."""
import os
import shutil
import signal
import tracemalloc
import zlib
from pathlib import Path

import pytest
import torch

from spacy_elmo.pretraining.batch_worker import PreparedBatches
from spacy_elmo.pretraining.checkpoint import load_checkpoint
from spacy_elmo.pretraining.trainer import Trainer

from ..cli.test_pretrain import FAST
from ..conftest import run_cli
from .conftest import Probe, fifo_that_ends, run_probe, snapshot


def pretrain(*extra, output="out"):
    return ["pretrain", "pretrain.cfg", output, "--paths.train", "corpus.txt", "--training.max_steps", "2",
            *FAST, *extra]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf8")
    return path


def _edit_config(ws: Path, old: str, new: str) -> None:
    config = ws / "pretrain.cfg"
    text = config.read_text(encoding="utf8")
    assert old in text
    config.write_text(text.replace(old, new), encoding="utf8")


def _corpus_dir(ws: Path) -> str:
    """The corpus as a directory of two files."""
    lines = (ws / "corpus.txt").read_text(encoding="utf8").splitlines(keepends=True)
    directory = ws / "corpus_dir"
    directory.mkdir(exist_ok=True)
    (directory / "a.txt").write_text("".join(lines[: len(lines) // 2]), encoding="utf8")
    (directory / "b.txt").write_text("".join(lines[len(lines) // 2 :]), encoding="utf8")
    return "corpus_dir"


def _with_run(ws: Path, run: Path, edit=None):
    shutil.copytree(run, ws / "out")
    if edit is not None:
        checkpoint = torch.load(ws / "out" / "checkpoint.pt", weights_only=True)
        edit(checkpoint)
        torch.save(checkpoint, ws / "out" / "checkpoint.pt")


PROBES = [
    Probe("config missing", lambda ws: ["pretrain", "none.cfg", "out"], "none.cfg"),
    Probe("config not a config", lambda ws: (_write(ws / "pretrain.cfg", "[training\nx = "), pretrain())[1],
          "pretrain.cfg"),
    Probe("corpus missing", lambda ws: pretrain("--paths.train", "none.txt"), "corpus path not found: none.txt"),
    Probe("corpus empty", lambda ws: (_write(ws / "corpus.txt", ""), pretrain())[1], "corpus.txt"),
    Probe("unknown config key", lambda ws: pretrain("--training.typo", "1"), "unknown setting(s) in [training]: typo"),
    Probe("max_steps 0", lambda ws: pretrain("--training.max_steps", "0"), "max_steps"),
    Probe("beta1 1.5", lambda ws: pretrain("--optimizer.beta1", "1.5"), "beta1"),
    Probe("eps -1", lambda ws: pretrain("--optimizer.eps", "-1"), "eps"),
    Probe("weight_decay -1", lambda ws: pretrain("--optimizer.weight_decay", "-1"), "weight_decay"),
    Probe("initial_accumulator -1",
          lambda ws: pretrain("--optimizer.name", "adagrad", "--optimizer.initial_accumulator", "-1"),
          "initial_accumulator"),
    Probe("lstm_dim 1e9", lambda ws: pretrain("--model.lstm_dim", "1000000000"), "lstm_dim"),
    Probe("--init-from a missing model", lambda ws: pretrain("--init-from", "nowhere"), "nowhere"),
    Probe("output is a file", lambda ws: pretrain(output="corpus.txt"), "is a file, not a directory"),
    Probe("--resume without a checkpoint", lambda ws: pretrain("--resume"), "No checkpoint at"),
    # Issue 51: non-finite and out-of-range numbers are refused where the settings are read.
    Probe("learn_rate 1e999", lambda ws: pretrain("--optimizer.learn_rate", "1e999"),
          "pretrain.cfg: optimizer.learn_rate must be a finite number (a 32-bit float, at most 3.403e+38), got inf"),
    Probe("learn_rate = 1e999 in the file",
          lambda ws: (_edit_config(ws, "learn_rate = 0.2", "learn_rate = 1e999"), pretrain())[1],
          "optimizer.learn_rate must be a finite number (a 32-bit float, at most 3.403e+38), got inf"),
    Probe("learn_rate = NaN in the file",
          lambda ws: (_edit_config(ws, "learn_rate = 0.2", "learn_rate = NaN"), pretrain())[1],
          "optimizer.learn_rate must be a finite number (a 32-bit float, at most 3.403e+38), got nan"),
    Probe("learn_rate 1e300", lambda ws: pretrain("--optimizer.learn_rate", "1e300"),
          "optimizer.learn_rate must be a finite number (a 32-bit float, at most 3.403e+38), got 1e+300"),
    Probe("learn_rate 1e30", lambda ws: pretrain("--optimizer.learn_rate", "1e30"),
          "optimizer.learn_rate must be in (0, 1e+06] (higher rates never train, and Adam's first step would "
          "overflow), got 1e+30"),
    Probe("dropout NaN in the file",
          lambda ws: (_edit_config(ws, "dropout = 0.1", "dropout = NaN"), pretrain())[1],
          "training.dropout must be a finite number"),
    Probe("seed -5", lambda ws: pretrain("--system.seed", "-5"), "system.seed must be from 0 to 4,294,967,295, got -5"),
    Probe("seed = 10**23 in the file",
          lambda ws: (_edit_config(ws, "seed = 0", f"seed = {10**23}"), pretrain())[1],
          "system.seed must be from 0 to 4,294,967,295, got 100000000000000000000000"),
    Probe("tokens_per_step = 10**23 in the file",
          lambda ws: (_edit_config(ws, "tokens_per_step = 4096", f"tokens_per_step = {10**23}"),
                      [arg for arg in pretrain() if arg not in ("--training.tokens_per_step", "48")])[1],
          "training.tokens_per_step must be from 1 to 1,048,576 (the batches of a step are held in memory "
          "together), got 100000000000000000000000"),
    Probe("tokens_per_step 2,000,000", lambda ws: pretrain("--training.tokens_per_step", "2000000"),
          "training.tokens_per_step must be from 1 to 1,048,576"),
    Probe("shuffle_buffer 10**9", lambda ws: pretrain("--corpus.shuffle_buffer", str(10**9)),
          "corpus.shuffle_buffer must be from 1 to 1,048,576"),
    Probe("sort_window x tokens_per_step too large",
          lambda ws: pretrain("--training.tokens_per_step", "1000000", "--training.sort_window", "32"),
          "training.sort_window × training.tokens_per_step is 32,000,000 tokens drawn at once, more than the "
          "8,388,608 a run holds in memory and in each checkpoint; lower either"),
    Probe("max_dev_sentences = 10**23 in the file",
          lambda ws: (_edit_config(ws, "max_dev_sentences = null", f"max_dev_sentences = {10**23}"), pretrain())[1],
          "corpus.max_dev_sentences must be at most 9,223,372,036,854,775,807 (a 64-bit integer)"),
    # An output directory that is, lies in or holds the corpus: its files would be the next run's text.
    Probe("output is the corpus directory",
          lambda ws: pretrain("--paths.train", _corpus_dir(ws), output="corpus_dir"),
          "Output directory corpus_dir is corpus.train (corpus_dir): its outputs would be read as corpus.train "
          "next time; choose an output directory apart from it"),
    Probe("output inside the corpus directory",
          lambda ws: pretrain("--paths.train", _corpus_dir(ws), output="corpus_dir/run"),
          "Output directory corpus_dir/run is inside corpus.train (corpus_dir)"),
    Probe("output inside a corpus glob's directory",
          lambda ws: (_corpus_dir(ws), pretrain("--paths.train", "corpus_dir/*.txt", output="corpus_dir/run"))[1],
          "Output directory corpus_dir/run is inside corpus.train (corpus_dir)"),
    Probe("output holds the corpus directory",
          lambda ws: pretrain("--paths.train", _corpus_dir(ws), output="."),
          "Output directory . holds corpus.train (corpus_dir)"),
    Probe("output inside the held-out directory",
          lambda ws: pretrain("--paths.dev", _corpus_dir(ws), output="corpus_dir/run"),
          "Output directory corpus_dir/run is inside corpus.dev (corpus_dir)"),
    # Issue 60.
    Probe("corpus is a FIFO", lambda ws: (os.mkfifo(ws / "corpus.fifo"), pretrain("--paths.train", "corpus.fifo"))[1],
          "corpus.train: corpus path corpus.fifo is a FIFO (named pipe), not a regular file or a directory"),
    Probe("output directory is a FIFO", lambda ws: (os.mkfifo(ws / "out"), pretrain())[1],
          "Output directory out is a FIFO (named pipe), not a directory (give a directory path)"),
    Probe("tokenizer en.stop_words (a module of spacy.lang)", lambda ws: pretrain("--corpus.tokenizer", "en.stop_words"),
          "corpus.tokenizer = 'en.stop_words': not a spaCy language code (for example 'en', 'de') nor 'whitespace'"),
    Probe("init-config --lang en.stop_words", lambda ws: ["init-config", "new.cfg", "--lang", "en.stop_words"],
          "corpus.tokenizer = 'en.stop_words': not a spaCy language code"),
    Probe("init-config into a FIFO", lambda ws: (os.mkfifo(ws / "new.cfg"), ["init-config", "new.cfg"])[1],
          "Output new.cfg is a FIFO (named pipe), not a regular file: refusing to replace it (give another path)"),
]


def _link(path: Path, target: Path) -> str:
    path.symlink_to(target)
    return path.name


# Issue 60: a vocabulary that is a FIFO blocked the run, one that links to a device never ended.
PROBES += [
    Probe("vocab.path a FIFO", lambda ws: (fifo_that_ends(ws / "fifo.txt"), pretrain("--vocab.path", "fifo.txt"))[1],
          "Vocabulary path fifo.txt is a FIFO (named pipe), not a regular file"),
    Probe("vocab.path a link to /dev/zero", lambda ws: pretrain("--vocab.path", _link(ws / "zero.txt", Path("/dev/zero"))),
          "Vocabulary path zero.txt is a character device, not a regular file"),
]


@pytest.mark.parametrize("probe", PROBES, ids=str)
def test_pretrain_refuses_with_one_line_and_changes_nothing(probe, workspace, capsys, monkeypatch):
    run_probe(probe, workspace, capsys, monkeypatch)


@pytest.mark.parametrize("environment,message", [
    ({"WORLD_SIZE": "abc"}, "WORLD_SIZE='abc' in the environment is not a number of processes or a rank; unset it, "
     "or start the run with torchrun, which sets it"),
    ({"WORLD_SIZE": "2"}, "WORLD_SIZE=2 is set, but not RANK, MASTER_ADDR, MASTER_PORT: start a run of several "
     "processes with torchrun (torchrun --nproc_per_node=2 -m spacy_elmo pretrain ...), or unset WORLD_SIZE for one process"),
], ids=["WORLD_SIZE=abc", "WORLD_SIZE=2 without torchrun"])
def test_a_process_group_the_environment_cannot_describe_is_one_line(environment, message, workspace, capsys, monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    run_probe(Probe(message, lambda ws: pretrain(), message), workspace, capsys, monkeypatch)


def test_a_spacy_corpus_that_inflates_a_thousandfold_is_refused_before_it_is_inflated(workspace, capsys, monkeypatch):
    """Issue 60: spaCy inflates a .spacy file whole (611 KB of zeros took 1.5 GB before the refusal);
    its inflated size is counted first, in constant memory."""
    compressor = zlib.compressobj(9)
    data = b"".join(compressor.compress(bytes(1 << 20)) for _ in range(128)) + compressor.flush()
    (workspace / "zeros.spacy").write_bytes(data)  # 128 MiB of zeros in 0.1 MB
    probe = Probe(
        "a .spacy corpus that inflates 1,000 times", lambda ws: pretrain("--paths.train", "zeros.spacy"),
        "zeros.spacy: inflates to over 80 MB, more than 100 times its 0.1 MB (plus 64 MiB), far more than a corpus "
        "of text does; refused before reading it (give the text as .txt or .jsonl files)",
    )
    tracemalloc.start()
    try:
        run_probe(probe, workspace, capsys, monkeypatch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak / 1e6:.0f} MB at the peak"


def test_pretrain_init_from_with_a_smaller_lstm_dim_refuses_and_changes_nothing(
    finished_run, workspace, capsys, monkeypatch
):
    probe = Probe(
        "--init-from with a smaller lstm_dim",
        lambda ws: pretrain("--init-from", str(finished_run), "--model.lstm_dim", "8"),
        "--init-from continues a biLM at its own sizes",
    )
    run_probe(probe, workspace, capsys, monkeypatch)


def test_pretrain_init_from_a_run_whose_vocabulary_is_a_fifo_refuses_and_changes_nothing(
    finished_run, workspace, capsys, monkeypatch
):
    def prepare(ws: Path) -> list:
        shutil.copytree(finished_run, ws / "run")
        (ws / "run" / "vocab.txt").unlink()
        fifo_that_ends(ws / "run" / "vocab.txt")
        return pretrain("--init-from", "run")

    run_probe(Probe("--init-from a run whose vocab.txt is a FIFO", prepare,
                    "Vocabulary path run/vocab.txt is a FIFO (named pipe), not a regular file"), workspace, capsys, monkeypatch)


def test_resume_after_a_training_file_was_deleted_refuses_and_changes_nothing(workspace, capsys, monkeypatch):
    from spacy_elmo.pretraining.run import pretrain as train

    from ..pretraining.util import fast_config

    monkeypatch.chdir(workspace)
    train(fast_config(Path(_corpus_dir(workspace)), training__max_steps=2, training__checkpoint_every=2), "out")
    capsys.readouterr()
    probe = Probe(
        "--resume after a training file was deleted",
        lambda ws: ((ws / "corpus_dir" / "b.txt").unlink(), pretrain(
            "--resume", "--paths.train", "corpus_dir", "--vocab.size", "1000", "--training.max_steps", "4"
        ))[1],
        "--resume: the training files (corpus.train = corpus_dir) are not those the run in out was trained on, "
        "compared by path, size and modification time: corpus_dir/b.txt deleted; "
        "resume with the files as they were (the run's read position is saved), or start a new run elsewhere",
    )
    run_probe(probe, workspace, capsys, monkeypatch)


def test_weights_gone_non_finite_stop_the_run_and_keep_the_last_checkpoint(
    finished_run, workspace, reference_dir, capsys, monkeypatch
):
    """Resumed at step 2 (with the run's own settings: a checkpoint every step), the biLM's weights
    become NaN in step 3: its checkpoint finds them, and the run stops with the checkpoint and
    exported biLM of step 2 as they were."""
    original_step = Trainer.step

    def poisoned(self, batch):
        result = original_step(self, batch)
        with torch.no_grad():
            next(self.model.parameters()).fill_(float("nan"))
        return result

    monkeypatch.setattr(Trainer, "step", poisoned)
    text = reference_dir / "bilm-tf" / "train" / "data.txt"
    _with_run(workspace, finished_run)
    before = snapshot(workspace)
    monkeypatch.chdir(workspace)
    code, _, err = run_cli(
        capsys, monkeypatch, *pretrain("--resume", "--paths.train", text, "--vocab.size", "1000", "--training.max_steps", "40")
    )
    lines = [line for line in err.splitlines() if line.startswith("✘")]
    assert code == 1 and "Traceback" not in err and err.rstrip().endswith(lines[0]) and len(lines) == 1, err
    assert lines[0] == (
        "✘ The biLM's weights are not finite (NaN or infinity) at step 3, so they were not saved; lower "
        "optimizer.learn_rate (now 0.2) or training.grad_clip and start again (the last checkpoint is from step 2)"
    )
    after = snapshot(workspace)
    changed = {key for key in set(before) | set(after) if before.get(key, "-") != after.get(key, "-")}
    assert changed == {"out/metrics.jsonl", "out/config.cfg"}  # the steps it logged, the settings it resumed with


def _signal_at_first_batch(monkeypatch, signum: int) -> None:
    """Send `signum` to this process when the run asks for its first batch (before its first step)."""
    def next_step(self):
        os.kill(os.getpid(), signum)
        raise AssertionError("the signal did not stop the run")

    monkeypatch.setattr(PreparedBatches, "next_step", next_step)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("resumed", [False, True], ids=["a new run", "a resumed run"])
def test_a_signal_before_the_first_step_removes_what_the_run_began_never_the_run_it_resumed(
    signum, resumed, finished_run, workspace, reference_dir, capsys, monkeypatch
):
    text = reference_dir / "bilm-tf" / "train" / "data.txt"
    args = ["--paths.train", text, "--vocab.size", "1000", "--training.max_steps", "4"]
    if resumed:
        _with_run(workspace, finished_run)
        args.append("--resume")
    before = snapshot(workspace)
    monkeypatch.chdir(workspace)
    _signal_at_first_batch(monkeypatch, signum)
    # A shell's background job starts with SIGINT ignored: give it Python's usual handler.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code, _, err = run_cli(capsys, monkeypatch, *pretrain(*args))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 130 and "Traceback" not in err, err  # typer's exit for a KeyboardInterrupt
    after = snapshot(workspace)
    if resumed:  # its settings, saved as it started, are the only change
        assert {key for key in set(before) | set(after) if before.get(key, "-") != after.get(key, "-")} <= {"out/config.cfg"}
    else:
        assert after == before and not (workspace / "out").exists()


#: Resume `finished_run` as it was trained.
RESUME = ["--resume", "--paths.train", Path(__file__).resolve().parents[1] / "fixtures" / "elmo_reference" / "bilm-tf"
          / "train" / "data.txt", "--vocab.size", "1000", "--training.max_steps", "4"]
RUN_PROBES = [
    ("another run's directory", None, [], "already holds a training run"),
    ("a truncated checkpoint", "truncate", ["--resume"], "checkpoint.pt"),
    ("a foreign checkpoint", "foreign", ["--resume"], "checkpoint.pt"),
    ("a step that is a string", lambda c: c.__setitem__("step", "7"), ["--resume"], "step"),
    ("a negative step", lambda c: c.__setitem__("step", -3), ["--resume"], "step"),
    # Issue 60: sizes and tensors of a tampered checkpoint, refused before they are used.
    ("options of a 10**6-wide LSTM", lambda c: c["options"]["lstm"].__setitem__("dim", 10**6), RESUME,
     "out/checkpoint.pt: describes a biLM of 592,067,232 parameters, more than the 400,000,000 spacy-elmo loads"),
    ("a sparse tensor in its weights", lambda c: _retype(c["model"], lambda t: t.to_sparse()), ["--resume"],
     "out/checkpoint.pt: 'model/bilm.char_encoder.char_embedding' is a sparse tensor, not dense real numbers"),
    ("a complex tensor in its weights", lambda c: _retype(c["model"], lambda t: t.to(torch.complex64)), ["--resume"],
     "out/checkpoint.pt: 'model/bilm.char_encoder.char_embedding' is a complex tensor, not dense real numbers"),
    ("a meta tensor in its optimizer state", lambda c: c["optimizer"]["state"][0].update(sum=torch.empty(1, device="meta")),
     ["--resume"], "out/checkpoint.pt: 'optimizer/state/0/sum' is a meta (no data) tensor, not dense real numbers"),
]


def _retype(tensors: dict, change) -> None:
    """The first tensor of `tensors` made another kind by `change`."""
    name = next(name for name, value in tensors.items() if isinstance(value, torch.Tensor))
    tensors[name] = change(tensors[name])


def _tamper(ws: Path, run: Path, how) -> None:
    _with_run(ws, run, how if callable(how) else None)
    checkpoint = ws / "out" / "checkpoint.pt"
    if how == "truncate":
        checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    elif how == "foreign":
        torch.save({"weights": torch.zeros(3)}, checkpoint)


@pytest.mark.parametrize("name,how,extra,message", RUN_PROBES, ids=[p[0] for p in RUN_PROBES])
def test_pretrain_on_a_tampered_run_refuses_and_changes_nothing(
    name, how, extra, message, finished_run, workspace, capsys, monkeypatch
):
    allowed = ["out/config.cfg"] if extra is RESUME else []  # a run resumed so far saves the settings it resumes with
    probe = Probe(name, lambda ws: (_tamper(ws, finished_run, how), pretrain(*extra))[1], message, allowed=allowed)
    run_probe(probe, workspace, capsys, monkeypatch)


def _damage_tokenized_text(run: Path) -> None:
    for path in (run / "tokenized").iterdir():
        path.write_bytes(b"\x00\xff" * 100)


def _replace_with_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


#: Issue 60: run files damaged between runs, met by --resume.
DAMAGED_RUN_FILES = [
    ("corpus_stats.json not JSON", lambda run: _write(run / "corpus_stats.json", "{oops"), [],
     "out/corpus_stats.json: damaged corpus statistics (Expecting property name enclosed in double quotes: line 1 "
     "column 2 (char 1)); delete it to resume without them"),
    ("corpus_stats.json a directory", lambda run: _replace_with_directory(run / "corpus_stats.json"), [],
     "out/corpus_stats.json: damaged corpus statistics (it is a directory); delete it to resume without them"),
    ("metrics.jsonl a directory", lambda run: _replace_with_directory(run / "metrics.jsonl"), ["out/config.cfg"],
     "The metrics log out/metrics.jsonl is a directory, not a regular file: refusing to replace it (move it out of "
     "the run's directory)"),
]


@pytest.mark.parametrize("name,damage,allowed,message", DAMAGED_RUN_FILES, ids=[p[0] for p in DAMAGED_RUN_FILES])
def test_resume_of_a_run_with_a_damaged_file_is_one_line(
    name, damage, allowed, message, finished_run, workspace, reference_dir, capsys, monkeypatch
):
    text = reference_dir / "bilm-tf" / "train" / "data.txt"
    probe = Probe(
        name, lambda ws: (_with_run(ws, finished_run), damage(ws / "out"), pretrain(
            "--resume", "--paths.train", text, "--vocab.size", "1000", "--training.max_steps", "4"))[2],
        message, allowed=allowed,
    )
    run_probe(probe, workspace, capsys, monkeypatch)


def test_resume_of_a_run_with_damaged_tokenized_text_stops_with_one_line_at_the_first_damaged_record(
    finished_run, workspace, reference_dir, capsys, monkeypatch
):
    """The batches the checkpoint holds train first; the next draw (within the 40 steps) meets the
    damage, and the run stops with the checkpoint of the last step before it."""
    _with_run(workspace, finished_run)
    _damage_tokenized_text(workspace / "out")
    monkeypatch.chdir(workspace)
    text = reference_dir / "bilm-tf" / "train" / "data.txt"
    code, _, err = run_cli(
        capsys, monkeypatch, *pretrain("--resume", "--paths.train", text, "--vocab.size", "1000", "--training.max_steps", "40")
    )
    lines = [line for line in err.splitlines() if line.startswith("✘")]
    assert code == 1 and "Traceback" not in err and len(lines) == 1 and err.rstrip().endswith(lines[0]), err
    assert lines[0].startswith("✘ out/tokenized/data.txt.") and lines[0].endswith(
        ".jsonl, line 1: damaged tokenized text (not a record of sentences and their place); delete out/tokenized to "
        "tokenize the corpus again"
    ), lines[0]
    assert 2 < load_checkpoint(workspace / "out" / "checkpoint.pt")["step"] < 40


@pytest.mark.slow
def test_a_one_token_line_of_megabytes_is_cut_before_the_stream(workspace, capsys, monkeypatch):
    """Issue 51: a 50 MB token took 8.1 GB and a 2.55 GB checkpoint (every pass over the token cache
    added a copy to the shuffle buffer). Cut to what the character encoder reads, it leaves no copy in
    the token cache, the vocabulary or the checkpoint, and none in memory beyond the line being read."""
    token_bytes = 4_000_000
    monkeypatch.chdir(workspace)
    code, _, err = run_cli(capsys, monkeypatch, *pretrain(output="warm-up"))  # lazy imports, outside the measure
    assert code == 0, err
    with (workspace / "corpus.txt").open("a", encoding="utf8") as corpus:
        corpus.write("y" * token_bytes + "\n")
    tracemalloc.start()
    try:
        code, _, err = run_cli(
            capsys, monkeypatch, *pretrain("--corpus.shuffle_buffer", "200", "--training.checkpoint_every", "1")
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 0, err
    sizes = {str(path.relative_to(workspace)): path.stat().st_size for path in (workspace / "out").rglob("*") if path.is_file()}
    assert max(sizes.values()) < token_bytes // 4, sizes
    assert peak < 4 * token_bytes, f"{peak / 1e6:.0f} MB at the peak"  # the line's bytes, its text, its token


@pytest.mark.parametrize(
    "text,extra",
    [("word\n", []), ("x" * 1_000_001 + "\n", ["--corpus.tokenizer", "en"])],
    ids=["one word", "a one-million-character line, spaCy's tokenizer"],
)
def test_tiny_or_odd_corpora_train(text, extra, workspace, capsys, monkeypatch):
    """Odd is not hostile: these are corpora, and the run ends normally."""
    from ..conftest import run_cli

    _write(workspace / "corpus.txt", text)
    monkeypatch.chdir(workspace)
    code, out, err = run_cli(capsys, monkeypatch, *pretrain(*extra))
    assert code == 0, err
    assert (workspace / "out" / "weights.hdf5").is_file()


#: Line separators of `str.splitlines` a .spacy corpus's tokens may hold; vocab.txt ends lines at "\n" alone.
ODD_TOKENS = ["foo\rbar", "foo\u2028bar", "foo\x85bar", "foo\x0bbar", "foo\x1cbar", "foo\u2029bar"]


def test_tokens_with_line_separators_train_resume_and_score(workspace, capsys, monkeypatch):
    """Issue 51: "foo\rbar" made vocab.txt read back one word longer, so the run could never
    resume and `perplexity` found the softmax the wrong shape."""
    from spacy.tokens import Doc, DocBin
    from spacy.vocab import Vocab

    words = (workspace / "corpus.txt").read_text(encoding="utf8").split()
    vocab = Vocab()
    docs = [Doc(vocab, words=words[i : i + 10] + ODD_TOKENS) for i in range(0, len(words), 10)]
    DocBin(docs=docs).to_disk(workspace / "corpus.spacy")
    monkeypatch.chdir(workspace)
    run = pretrain("--paths.train", "corpus.spacy", "--training.checkpoint_every", "1")
    code, _, err = run_cli(capsys, monkeypatch, *run)
    assert code == 0, err
    saved = (workspace / "out" / "vocab.txt").read_bytes().decode("utf8").split("\n")
    assert set(ODD_TOKENS) <= set(saved)
    code, out, err = run_cli(capsys, monkeypatch, *run, "--training.max_steps", "3", "--resume")
    assert code == 0 and "Resuming from step 2" in out, out + err
    code, out, err = run_cli(capsys, monkeypatch, "perplexity", "out", "corpus.spacy")
    assert code == 0 and "perplexity" in out, out + err
