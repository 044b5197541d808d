"""Helpers for the spaCy project tests: a copy of the project to run in, tiny data, `spacy project run`."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Dict, List, Optional, Sequence

import pytest

REPO = Path(__file__).resolve().parents[2]
PROJECT_FILES = ("project.yml", "assets", "scripts", "configs")


def load_script(name: str, folder: str = "scripts") -> ModuleType:
    """Import `<folder>/<name>.py` (the project's scripts and the maintainer tools are not packages)."""
    path = REPO / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"project_{folder}.{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_project(destination: Path) -> Path:
    """What a fresh clone holds of the project: project.yml, assets (not assets/full), scripts, configs."""
    destination.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=shutil.ignore_patterns("full", "__pycache__"))
        else:
            shutil.copy(source, destination / name)
    return destination


def head_blocks(source: Path, destination: Path, n_blocks: int) -> Path:
    """The first `n_blocks` blank-line-separated sentence blocks of a CoNLL-U/IOB2 file."""
    blocks = [b for b in source.read_text(encoding="utf8").split("\n\n") if b.strip()][:n_blocks]
    destination.write_text("".join(b.strip("\n") + "\n\n" for b in blocks), encoding="utf8")
    return destination


def head_lines(source: Path, destination: Path, n_lines: int) -> Path:
    lines = source.read_text(encoding="utf8").splitlines(keepends=True)[:n_lines]
    destination.write_text("".join(lines), encoding="utf8")
    return destination


def project_run(
    project: Path, target: str, overrides: Dict[str, object], *, timeout: float = 600, env: Optional[Dict[str, str]] = None,
) -> subprocess.CompletedProcess:
    """`python -m spacy project run TARGET PROJECT --vars.k v ...` with `env` added, output captured (stdout + stderr)."""
    command: List[str] = [sys.executable, "-m", "spacy", "project", "run", target, str(project)]
    for key, value in overrides.items():
        command += [f"--vars.{key}", str(value)]
    return subprocess.run(
        command, cwd=project, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )


def full_data_env(project: Path) -> Dict[str, str]:
    """The environment of the documented full-size run: weasel's overrides from configs/full.vars."""
    return {"WEASEL_CONFIG_OVERRIDES": (project / "configs" / "full.vars").read_text(encoding="utf8")}


def output_of(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


@pytest.fixture()
def project_dir(tmp_path: Path) -> Path:
    return copy_project(tmp_path / "project")


@pytest.fixture()
def tiny_data(project_dir: Path) -> Dict[str, object]:
    """Vars that point the `all` workflow at a handful of the embedded sentences."""
    assets = project_dir / "assets"
    tiny = project_dir / "tiny"
    tiny.mkdir()
    return {
        "ud_train": head_blocks(assets / "ud_english_ewt/en_ewt-ud-train.sample.conllu", tiny / "ud_train.conllu", 40).relative_to(project_dir),
        "ud_dev": head_blocks(assets / "ud_english_ewt/en_ewt-ud-dev.sample.conllu", tiny / "ud_dev.conllu", 20).relative_to(project_dir),
        "ner_train": head_blocks(assets / "uner_english_ewt/en_ewt-uner-demo-train.iob2", tiny / "ner_train.iob2", 60).relative_to(project_dir),
        "ner_dev": head_blocks(assets / "uner_english_ewt/en_ewt-uner-demo-dev.iob2", tiny / "ner_dev.iob2", 30).relative_to(project_dir),
        "raw_text": head_lines(assets / "raw_text/sample_public_domain.txt", tiny / "raw.txt", 300).relative_to(project_dir),
    }


# The smallest settings that still run every step of the workflow for real.
TINY_SETTINGS: Dict[str, object] = {
    "pretrain_size": "tiny",
    "pretrain_lstm_dim": 64,
    "pretrain_projection_dim": 16,
    "pretrain_steps": 4,
    "pretrain_tokens_per_step": 256,
    "pretrain_vocab_size": 500,
    "pretrain_eval_every": 2,
    "pretrain_checkpoint_every": 2,
    "pretrain_max_dev_sentences": 20,
    "adapt_steps": 2,
    "train_max_steps": 6,
    "train_eval_frequency": 3,
}


def missing(paths: Sequence[Path]) -> List[str]:
    return [str(p) for p in paths if not p.exists()]
