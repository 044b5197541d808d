"""Whether a checkpoint can go on under a config (--resume), and whether it is this run (--resume auto)."""
import os

import pytest

from spacy_elmo.pretraining.resume import another_run, check_resumable, run_origin
from spacy_elmo.errors import CheckpointError, ConfigError
from spacy_elmo.pretraining.run_directory import RunDirectory

from .util import fast_config


def _checkpoint(config, origin, world_size=1):
    """The parts of a checkpoint the checks read."""
    return {
        "config": config.to_str(), "sections": config.model_sections(), "origin": origin,
        "processes": [{}] * world_size,
    }


def test_the_same_settings_start_and_corpus_are_this_run(tiny_text):
    config = fast_config(tiny_text)
    origin = run_origin(None, [tiny_text])
    assert another_run(_checkpoint(config, origin), config=config, origin=origin) is None


def test_other_settings_another_start_or_a_changed_corpus_are_another_run(tmp_path, tiny_text):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(tiny_text.read_text(encoding="utf8"), encoding="utf8")
    config = fast_config(corpus)
    origin = run_origin(None, [corpus])
    saved = _checkpoint(config, origin)
    other = fast_config(corpus, optimizer__learn_rate=0.5, training__max_steps=11)
    assert another_run(saved, config=other, origin=origin) == "it was trained with other settings in [optimizer], [training]"
    assert another_run(saved, config=config, origin=run_origin("english-compact", [corpus])) == (
        "it started from new weights, this run from --init-from english-compact"
    )
    stat = corpus.stat()
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert another_run(saved, config=config, origin=run_origin(None, [corpus])) == (
        "its corpus files are not as they were at its last checkpoint"
    )


def test_resume_needs_the_same_model_settings_and_as_many_processes(tmp_path, tiny_text):
    config = fast_config(tiny_text)
    directory = RunDirectory(tmp_path)
    origin = run_origin(None, [tiny_text])
    check_resumable(_checkpoint(config, origin), directory, config=config, origin=origin, world_size=1)
    with pytest.raises(ConfigError, match=r"--resume: the config's \[model\] differ from the run in"):
        check_resumable(
            _checkpoint(fast_config(tiny_text, model__lstm_dim=32), origin), directory, config=config,
            origin=origin, world_size=1,
        )
    with pytest.raises(CheckpointError, match=r"checkpoint.pt was written by 2 process\(es\); resume it with the same number \(got 1\)"):
        check_resumable(_checkpoint(config, origin, world_size=2), directory, config=config, origin=origin, world_size=1)


def _corpus_dir(root, names):
    directory = root / "corpus"
    directory.mkdir(exist_ok=True)
    for name in names:
        (directory / name).write_text(f"text of {name}\n", encoding="utf8")
    return directory


def test_resume_refuses_training_files_deleted_added_or_changed_and_names_them(tmp_path):
    corpus = _corpus_dir(tmp_path, ["a.txt", "b.txt", "c.txt"])
    config = fast_config(corpus)
    files = lambda: sorted(corpus.iterdir())  # noqa: E731
    saved = _checkpoint(config, run_origin(None, files()))
    directory = RunDirectory(tmp_path / "out")

    def refusal() -> str:
        with pytest.raises(ConfigError) as error:
            check_resumable(saved, directory, config=config, origin=run_origin(None, files()), world_size=1)
        return str(error.value)

    (corpus / "b.txt").unlink()
    (corpus / "d.txt").write_text("new\n", encoding="utf8")
    (corpus / "c.txt").write_text("changed\n", encoding="utf8")
    message = refusal()
    assert message.startswith(f"--resume: the training files (corpus.train = {corpus}) are not those the run in ")
    assert "compared by path, size and modification time: " in message
    assert f"{corpus / 'b.txt'} deleted, {corpus / 'd.txt'} new, {corpus / 'c.txt'} changed;" in message
    for name in "efg":
        (corpus / f"{name}.txt").write_text("more\n", encoding="utf8")
    assert refusal().count(" new") == 3 and ", and 3 more;" in refusal()


def test_resume_compares_the_training_files_not_the_held_out_ones(tmp_path, tiny_text):
    corpus = _corpus_dir(tmp_path, ["a.txt"])
    dev = tmp_path / "dev.txt"
    dev.write_text("held out\n", encoding="utf8")
    config = fast_config(corpus)
    origin = run_origin(None, [corpus / "a.txt"], [dev])
    dev.write_text("other held-out text\n", encoding="utf8")
    now = run_origin(None, [corpus / "a.txt"], [tiny_text])
    directory = RunDirectory(tmp_path / "out")
    check_resumable(_checkpoint(config, origin), directory, config=config, origin=now, world_size=1)
    # A checkpoint from before n_train_files: all its corpus files are compared.
    older = {key: value for key, value in origin.items() if key != "n_train_files"}
    with pytest.raises(ConfigError, match="dev.txt deleted"):
        check_resumable(_checkpoint(config, older), directory, config=config, origin=now, world_size=1)
