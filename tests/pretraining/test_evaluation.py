"""A finished run's perplexity on any text: the same figures the run reported."""
import json

import pytest

from spacy_elmo.errors import InputError
from spacy_elmo.pretraining.evaluation import run_perplexity
from spacy_elmo.pretraining.run import pretrain

from .util import fast_config


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, reference_dir):
    text = reference_dir / "bilm-tf" / "train" / "data.txt"
    output_dir = tmp_path_factory.mktemp("run") / "out"
    summary = pretrain(fast_config(text, text, training__max_steps=20), output_dir)
    return output_dir, summary, text


def test_the_run_s_own_held_out_figures_are_reproduced(finished_run):
    output_dir, summary, text = finished_run
    result = run_perplexity(output_dir, [text], unigram=True)
    for key in ("dev_perplexity", "dev_perplexity_forward", "dev_perplexity_backward", "dev_tokens"):
        assert result[key] == pytest.approx(summary[key], rel=1e-5), key
    stats = json.loads((output_dir / "corpus_stats.json").read_text())
    assert result["unigram_perplexity"] == pytest.approx(stats["dev_unigram_perplexity"], rel=1e-9)
    assert result["sentences"] == 14


def test_max_sentences_and_a_directory_that_is_not_a_run(finished_run, tmp_path):
    output_dir, _, text = finished_run
    assert run_perplexity(output_dir, [text], max_sentences=2)["sentences"] == 2
    with pytest.raises(InputError, match="is not a finished pretraining run: no config.cfg, vocab.txt, softmax.hdf5"):
        run_perplexity(tmp_path, [text])
