"""Whether a checkpoint can go on under a config (--resume), and whether it is this run (--resume auto)."""
import os

import pytest

from spacy_elmo.pretraining.checkpoint import another_run, check_resumable, run_origin
from spacy_elmo.pretraining.errors import CheckpointError, ConfigError
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
    check_resumable(_checkpoint(config, None), directory, config=config, train_files=[tiny_text], world_size=1)
    with pytest.raises(ConfigError, match=r"--resume: the config's \[model\] differ from the run in"):
        check_resumable(
            _checkpoint(fast_config(tiny_text, model__lstm_dim=32), None), directory, config=config,
            train_files=[tiny_text], world_size=1,
        )
    with pytest.raises(CheckpointError, match=r"checkpoint.pt was written by 2 process\(es\); resume it with the same number \(got 1\)"):
        check_resumable(_checkpoint(config, None, world_size=2), directory, config=config, train_files=[tiny_text], world_size=1)
