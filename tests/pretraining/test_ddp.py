"""Two-process DistributedDataParallel pretraining on the CPU (gloo), through torchrun."""
import os
import subprocess
import sys

import pytest

from spacy_elmo.models.pytorch.original_format import load_bilm
from spacy_elmo.pretraining.checkpoint import load_checkpoint
from spacy_elmo.pretraining.default_config import default_config_text
from spacy_elmo.pretraining.corpus import TextSplitter
from spacy_elmo.pretraining.metrics import MetricsLog

from .util import fast_overrides


def _torchrun(config_path, output_dir, overrides, *extra):
    args = [f"--{key}={'null' if value is None else value}" for key, value in overrides.items()]
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=2",
        "-m", "spacy_elmo", "pretrain", str(config_path), str(output_dir), *args, *extra,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.slow
def test_two_gloo_processes_train_on_their_own_shares(tmp_path, tiny_text):
    config_path = tmp_path / "pretrain.cfg"
    config_path.write_text(default_config_text(size="tiny"), encoding="utf8")
    overrides = fast_overrides(
        tiny_text, tiny_text, **{
            "training.max_steps": 40, "training.checkpoint_every": 20, "training.log_every": 10,
            "training.eval_every": 20, "training.eval_at_start": "true", "training.tokens_per_step": 96,
        }
    )
    output_dir = tmp_path / "out"
    _torchrun(config_path, output_dir, overrides)

    checkpoint = load_checkpoint(output_dir / "checkpoint.pt")
    assert checkpoint["step"] == 40 and len(checkpoint["processes"]) == 2
    lines = tiny_text.read_text(encoding="utf8").splitlines()
    splitter = TextSplitter(tokenizer="whitespace", max_window=12)
    for rank, state in enumerate(checkpoint["processes"]):
        share = {" ".join(w) for line in lines[rank::2] for w in splitter(line)}
        held = [" ".join(s) for s in state["stream"]["buffer"]] + [
            " ".join(s) for batch in state["stream"]["pending"] for s in batch
        ]
        assert held and set(held) <= share  # each process reads only its own lines
    records = MetricsLog(output_dir / "metrics.jsonl").read()
    dev = [r for r in records if r["kind"] == "dev"]
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in dev] == [0, 20, 40]
    assert dev[-1]["dev_perplexity"] < dev[0]["dev_perplexity"] * 0.8
    assert dev[0]["dev_tokens"] == sum(len(w) + 1 for line in lines for w in splitter(line))
    assert train[0]["tokens"] > 10 * 48  # both processes' tokens are counted
    assert load_bilm(output_dir).options.lstm_dim == 64

    overrides["training.max_steps"] = 44
    _torchrun(config_path, output_dir, overrides, "--resume")
    assert load_checkpoint(output_dir / "checkpoint.pt")["step"] == 44
    assert [r["step"] for r in MetricsLog(output_dir / "metrics.jsonl").read() if r["kind"] == "train"][-1] == 44
