"""The spaCy project (project.yml): its deps, the `all` workflow end to end on tiny data, missing inputs, resume."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict

import pytest
import srsly
from weasel.util import load_project_config, parse_config_overrides

from .conftest import REPO, TINY_SETTINGS, full_data_env, head_blocks, head_lines, load_script, missing, output_of, project_run

check_inputs = load_script("check_inputs")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_all_workflow_on_tiny_data(project_dir: Path, tiny_data):
    package_name = "elmo_project_test"
    overrides = {**tiny_data, **TINY_SETTINGS, "package_name": package_name}
    result = project_run(project_dir, "all", overrides)
    assert result.returncode == 0, output_of(result)[-6000:]

    metrics = project_dir / "metrics" / "sample"
    systems = ("baseline", "vectors", "elmo", "elmo_vectors")
    expected = [metrics / f"{task}_{system}.json" for task in ("ud", "ner") for system in systems]
    assert not missing(expected + [metrics / "compare.md", metrics / "compare.png"])
    ud_elmo = json.loads((metrics / "ud_elmo.json").read_text())
    ner_elmo = json.loads((metrics / "ner_elmo.json").read_text())
    for key in ("tag_acc", "dep_uas", "dep_las"):
        assert 0.0 <= ud_elmo[key] <= 1.0, key
    assert 0.0 <= ner_elmo["ents_f"] <= 1.0

    table = (metrics / "compare.md").read_text()
    assert "| UD | LAS |" in table and "| NER | NER F |" in table
    assert "| Task | Metric | baseline (CNN) | + vectors | + ELMo | + ELMo + vectors |" in table
    assert (project_dir / "vectors" / "sample" / "spacy" / "vocab" / "vectors").exists()
    assert "held-out perplexity" in table  # from the pretraining log
    chart = (metrics / "compare.png").read_bytes()
    assert chart.startswith(PNG_MAGIC) and len(chart) > 10_000

    pretraining = project_dir / "pretraining" / "sample"
    assert not missing([pretraining / "options.json", pretraining / "weights.hdf5", pretraining / "metrics.jsonl"])
    # `adapt` continued the shipped English biLM (its sizes) on the task's training sentences.
    from spacy_elmo.models.loaders import find_model
    from spacy_elmo.named_models import language_model_folder

    shipped_options = find_model("english-compact")[1]
    assert json.loads((pretraining / "options.json").read_text()) == json.loads(shipped_options.read_text())
    assert (pretraining / "vocab.txt").read_text() == (language_model_folder("english-compact") / "vocab.txt").read_text()

    wheel = project_dir / "packages" / "dist" / f"en_{package_name}-0.1.0-py3-none-any.whl"
    assert wheel.exists()
    check = json.loads((metrics / "package_check.json").read_text())
    assert check["problems"] == []
    assert "/venv/" in check["package_file"]
    assert check["tensor_shape"][0] == check["n_tokens"] > 0
    options = json.loads((pretraining / "options.json").read_text())
    n_layers, n_tokens, width = check["elmo_layers_shape"]
    assert (n_layers, n_tokens, width) == (options["lstm"]["n_layers"] + 1, check["n_tokens"], 2 * options["lstm"]["projection_dim"])
    assert check["pipeline"][0] == "elmo"

    # Nothing changed: a second run skips every step that has outputs.
    again = project_run(project_dir, "all", overrides)
    assert again.returncode == 0, output_of(again)[-3000:]
    for step in ("vectors", "adapt", "train-ud", "train-ner", "evaluate-ud", "evaluate-ner", "package"):
        assert f"Skipping '{step}': nothing changed" in again.stdout


@pytest.mark.slow
def test_the_ud_workflow_runs_for_portuguese_from_its_vars_file(project_dir: Path):
    """from-scratch-ud with configs/portuguese.vars (Portuguese tokenizer, pipelines, package),
    on the first sentences of the embedded Portuguese sample."""
    assets, tiny = project_dir / "assets", project_dir / "tiny"
    tiny.mkdir()
    overrides = {
        **TINY_SETTINGS, "package_name": "elmo_pt_test",
        "ud_train": head_blocks(assets / "ud_portuguese_bosque/pt_bosque-ud-train.sample.conllu", tiny / "train.conllu", 40).relative_to(project_dir),
        "ud_dev": head_blocks(assets / "ud_portuguese_bosque/pt_bosque-ud-dev.sample.conllu", tiny / "dev.conllu", 20).relative_to(project_dir),
        "raw_text": head_lines(assets / "raw_text/sample_public_domain_pt.txt", tiny / "raw.txt", 300).relative_to(project_dir),
    }
    env = {"WEASEL_CONFIG_OVERRIDES": portuguese_vars(project_dir, overrides)}
    result = project_run(project_dir, "from-scratch-ud", {}, env=env)
    assert result.returncode == 0, output_of(result)[-6000:]
    metrics = project_dir / "metrics" / "pt_sample"
    systems = ("baseline", "vectors", "elmo", "elmo_vectors")
    assert not missing([metrics / f"ud_{system}.json" for system in systems] + [metrics / "compare.md"])
    assert not list(metrics.glob("ner_*")) and "| UD | LAS |" in (metrics / "compare.md").read_text()
    assert json.loads((project_dir / "training/pt_sample/ud_elmo/model-best/meta.json").read_text())["lang"] == "pt"
    assert (project_dir / "packages" / "dist" / "pt_elmo_pt_test-0.1.0-py3-none-any.whl").exists()
    assert json.loads((metrics / "package_check.json").read_text())["problems"] == []


def portuguese_vars(project_dir: Path, overrides: Dict[str, object]) -> str:
    """configs/portuguese.vars with `overrides` in place of its own settings (weasel's overrides
    variable wins over --vars, as configs/full.vars documents)."""
    lines = [line for line in (project_dir / "configs" / "portuguese.vars").read_text(encoding="utf8").splitlines()
             if line.split()[0][len("--vars."):] not in overrides]
    return "\n".join(lines + [f"--vars.{key} {value}" for key, value in overrides.items()])


def test_the_portuguese_vars_point_the_ud_workflow_at_portuguese_data(project_dir: Path, monkeypatch):
    raw = srsly.read_yaml(project_dir / "project.yml")
    assert not any("ner" in step for step in raw["workflows"]["from-scratch-ud"])
    for name, folder in (("portuguese.vars", "assets/ud_portuguese_bosque"), ("portuguese_full.vars", "/data/ud_portuguese_bosque")):
        monkeypatch.setenv("WEASEL_CONFIG_OVERRIDES", (project_dir / "configs" / name).read_text(encoding="utf8"))
        overrides = parse_config_overrides(["--vars.data_dir", "/data"])
        assert set(overrides) <= {f"vars.{var}" for var in raw["vars"]}
        commands = commands_of(load_project_config(project_dir, overrides=overrides))
        assert commands["convert-ud"]["deps"][0].startswith(f"{folder}/pt_bosque-ud-train")
        assert all("--nlp.lang pt" in line for line in commands["train-ud"]["script"])
        assert "--lang pt" in commands["vectors"]["script"][0] and "--corpus.tokenizer pt" in commands["pretrain"]["script"][0]
    result = subprocess.run(
        [sys.executable, "scripts/check_inputs.py", "--vars.scale", "pt_sample"], cwd=project_dir, capture_output=True, text=True,
        env={**os.environ, "WEASEL_CONFIG_OVERRIDES": (project_dir / "configs" / "portuguese.vars").read_text(encoding="utf8")},
    )
    assert result.returncode == 0, output_of(result)


@pytest.mark.slow
def test_missing_embedded_asset_says_how_to_restore_it(project_dir: Path):
    (project_dir / "assets" / "raw_text" / "sample_public_domain.txt").unlink()
    result = project_run(project_dir, "from-scratch", {}, timeout=600)
    output = output_of(result)
    assert result.returncode != 0
    assert "assets/raw_text/sample_public_domain.txt" in output
    assert "git checkout -- assets/" in output
    assert "--vars.raw_text" in output
    assert not (project_dir / "corpus" / "sample" / "ud" / "train.spacy").exists()  # stopped before converting


@pytest.mark.slow
def test_missing_full_data_says_what_to_fetch_and_which_var_to_set(project_dir: Path, tmp_path: Path):
    empty = tmp_path / "no_data_here"
    empty.mkdir()
    result = project_run(project_dir, "from-scratch", {"data_dir": empty}, timeout=600, env=full_data_env(project_dir))
    output = output_of(result)
    assert result.returncode != 0
    assert "python -m spacy project assets --extra" in output
    assert "https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/r2.16/en_ewt-ud-train.conllu" in output
    assert "--vars.data_dir" in output and "vars.ud_train in WEASEL_CONFIG_OVERRIDES" in output
    # CoNLL-2003 has no download: the message says why and what to set instead.
    assert "not redistributable" in output and "vars.ner_train in WEASEL_CONFIG_OVERRIDES" in output
    assert not (project_dir / "corpus" / "full").exists()  # stopped before converting


@pytest.mark.slow
def test_full_inputs_are_found_in_a_local_data_dir(project_dir: Path, data_dir: Path):
    result = project_run(project_dir, "check-inputs", {"data_dir": data_dir}, timeout=600, env=full_data_env(project_dir))
    assert result.returncode == 0, output_of(result)
    assert "inputs of the workflows are present" in output_of(result)


# ---- project.yml itself: what weasel makes of it


def commands_of(config: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {command["name"]: command for command in config["commands"]}


def test_every_dep_and_output_is_one_path(project_dir: Path):
    """Confection joins an item ending with ${vars...} and the next one starting with ${vars...}."""
    raw = commands_of(srsly.read_yaml(project_dir / "project.yml"))
    for name, command in commands_of(load_project_config(project_dir)).items():
        for key in ("deps", "outputs"):
            assert len(command.get(key, [])) == len(raw[name].get(key, [])), (name, key)


def test_each_step_lists_the_files_its_script_names_in_its_deps(project_dir: Path):
    for name, command in commands_of(load_project_config(project_dir)).items():
        if name == "check-inputs":
            continue  # it gets the inputs' paths to check them: as deps, weasel would stop first, unexplained
        named = set(re.findall(r"(?:scripts|tools|configs)/[\w.]+\.(?:py|cfg)", " ".join(command["script"])))
        assert named <= set(command.get("deps", [])), name
        for dep in command.get("deps", []):
            if dep.split("/")[0] in ("scripts", "tools", "configs"):
                assert (REPO / dep).exists(), (name, dep)


def test_check_inputs_gets_every_var_that_names_an_input():
    raw = srsly.read_yaml(REPO / "project.yml")
    paths = [dep for step in check_inputs.workflow_steps(raw) for dep in step.get("deps", [])]
    used = set(re.findall(r"\$\{vars\.(\w+)\}", " ".join(paths + [asset["dest"] for asset in raw["assets"]])))
    passed = set(re.findall(r"--vars\.(\w+) \$\{vars\.\1\}", " ".join(commands_of(raw)["check-inputs"]["script"])))
    assert used <= passed, used - passed
    assert all(workflow[0] == "check-inputs" for workflow in raw["workflows"].values())


def test_full_vars_set_known_vars_and_point_the_steps_at_data_dir(project_dir: Path, monkeypatch):
    monkeypatch.setenv("WEASEL_CONFIG_OVERRIDES", full_data_env(project_dir)["WEASEL_CONFIG_OVERRIDES"])
    overrides = parse_config_overrides(["--vars.data_dir", "/data"])
    assert set(overrides) <= {f"vars.{name}" for name in srsly.read_yaml(project_dir / "project.yml")["vars"]}
    commands = commands_of(load_project_config(project_dir, overrides=overrides))
    assert commands["convert-ner"]["deps"] == ["/data/conll2003/train.txt", "scripts/convert.py", "/data/conll2003/dev.txt"]
    assert "corpus/full/ner/train.spacy" in commands["convert-ner"]["outputs"]
    # The configs' own settings stand.
    assert "--training.max_steps" not in " ".join(commands["train-ud"]["script"])
    assert "--model.lstm_dim" not in " ".join(commands["pretrain"]["script"])


@pytest.mark.slow
def test_interrupted_pretraining_resumes_when_the_workflow_runs_again(project_dir: Path, tiny_data):
    overrides = {**tiny_data, **TINY_SETTINGS, "pretrain_steps": 60, "pretrain_eval_every": 30}
    assert project_run(project_dir, "split-text", overrides).returncode == 0
    checkpoint = project_dir / "pretraining" / "sample" / "checkpoint.pt"
    command = [sys.executable, "-m", "spacy", "project", "run", "pretrain", str(project_dir)]
    for key, value in overrides.items():
        command += [f"--vars.{key}", str(value)]
    process = subprocess.Popen(command, cwd=project_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    while not checkpoint.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert checkpoint.exists(), "no checkpoint within 240 s"
    assert process.poll() is None, "pretraining ended before it could be interrupted:\n" + process.communicate()[0][-3000:]
    os.killpg(process.pid, signal.SIGKILL)  # a crash or a lost machine: no chance to clean up
    process.wait()
    lock = project_dir / "project.lock"
    assert not lock.exists() or "pretrain" not in lock.read_text()

    result = project_run(project_dir, "pretrain", overrides)
    output = output_of(result)
    assert result.returncode == 0, output[-3000:]
    assert "Resuming from step" in output and "moved it to" not in output
    records = [json.loads(line) for line in (checkpoint.parent / "metrics.jsonl").read_text().splitlines()]
    train_steps = [r["step"] for r in records if r["kind"] == "train"]
    assert train_steps == sorted(set(train_steps)) and train_steps[-1] == 60
