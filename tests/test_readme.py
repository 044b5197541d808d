"""The README and docs a user reads: short, links that resolve, imports that work, and the
README's commands and snippets run in order as a new user would (the walk-through)."""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted(ROOT.glob("spacy_elmo/resources/*/*.md")),
    *sorted(ROOT.glob("models/*/*/*.md")),
]


def test_the_readme_reads_in_five_minutes():
    assert len((ROOT / "README.md").read_text(encoding="utf8").splitlines()) <= 250


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    text = page.read_text(encoding="utf8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"


def fenced_blocks(page: Path) -> List[Tuple[str, str]]:
    """The fenced blocks of `page`, in order: (language, text)."""
    return re.findall(r"```(\w+)\n(.*?)```", page.read_text(encoding="utf8"), flags=re.S)


def run_python_block(block: str, number: int) -> None:
    """A ```python block as a user pastes it (in the working directory)."""
    exec(compile(block, f"README.md, python block {number}", "exec"), {})


def test_the_readme_python_runs(tmp_path, monkeypatch, reference_dir):
    """Every ```python block, as a user pastes it: the fixture biLM stands at the README's
    placeholder path, and what the blocks write lands in a fresh folder."""
    blocks = [text for language, text in fenced_blocks(ROOT / "README.md") if language == "python"]
    assert any("from spacy_elmo import" in block for block in blocks)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(reference_dir / "allennlp", tmp_path / "path" / "to" / "model_dir")
    for number, block in enumerate(blocks, start=1):
        run_python_block(block, number)
    assert (tmp_path / "elmo_pipeline" / "elmo").is_dir()
    assert (tmp_path / "out_dir" / "weights.hdf5").is_file()


#: README commands the walk-through does not run (by how they start), and why.
NOT_RUN = {
    "pip install": "installs packages: needs the network and changes the environment (.ci/run installs as the README says)",
    "python -m spacy project run all": "the whole workflow, minutes long: tests/project/test_project.py runs it",
    "python -m pytest": "this suite itself",
    "torchrun": "one process per GPU: tests/pretraining/test_ddp.py runs two processes on CPU",
}
#: What a command that trains gets added, to run in seconds: a tiny biLM, two steps. (A plain
#: --resume gets nothing: it must continue the run with the settings the run already has; a
#: --resume auto repeats the command of the run, so it gets them too.)
FAST = {"init-config": ["--size", "tiny"], "pretrain": ["--training.max_steps", "2", "--training.tokens_per_step", "256"]}


def _readme_inputs(folder: Path) -> None:
    """The files the README leaves to the user, made from the embedded sample: tokenised
    sentences, a training text and a held-out text."""
    conllu = (ROOT / "assets" / "ud_english_ewt" / "en_ewt-ud-dev.sample.conllu").read_text(encoding="utf8")
    sentences = [line[len("# text = "):] for line in conllu.splitlines() if line.startswith("# text = ")][:20]
    (folder / "sentences.txt").write_text("".join(" ".join(s.split()) + "\n" for s in sentences), encoding="utf8")
    paragraphs = (ROOT / "assets" / "raw_text" / "sample_public_domain.txt").read_text(encoding="utf8").splitlines()
    (folder / "corpus.txt").write_text("\n".join(paragraphs[:150]) + "\n", encoding="utf8")
    (folder / "heldout.txt").write_text("\n".join(paragraphs[150:180]) + "\n", encoding="utf8")


def _run_command(command: str, folder: Path, env: dict) -> None:
    words = shlex.split(command)
    words[0] = sys.executable if words[0] == "python" else words[0]
    if words[-1] != "--resume":
        words += next((extra for name, extra in FAST.items() if name in words), [])
    done = subprocess.run(words, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"README: {command}\n{done.stdout}{done.stderr}"


@pytest.mark.slow
def test_the_readme_walk_through(tmp_path, monkeypatch, reference_dir):
    """Every fenced command and snippet of the README, in order, in one fresh folder, as a new
    user runs them (sizes and steps cut, see FAST; what is not run, and why: NOT_RUN)."""
    _readme_inputs(tmp_path)
    shutil.copytree(reference_dir / "allennlp", tmp_path / "path" / "to" / "model_dir")
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    skipped, python_blocks = set(), 0
    for language, block in fenced_blocks(ROOT / "README.md"):
        if language == "python":
            python_blocks += 1
            run_python_block(block, python_blocks)
            continue
        assert language == "bash", language
        for line in block.splitlines():
            for command in re.split(r"\s+&&\s+", re.sub(r"(^|\s)#.*", "", line).strip()):
                reason = next((start for start in NOT_RUN if command.startswith(start)), None)
                if reason is not None:
                    skipped.add(reason)
                elif command:
                    _run_command(command, tmp_path, env)
    assert skipped == set(NOT_RUN)  # a README command no longer there leaves no stale reason here
    for output in ("out/embeddings.hdf5", "out/weights.hdf5", "adapted/weights.hdf5", "elmo_pipeline/elmo", "out_dir"):
        assert (tmp_path / output).exists(), output
    assert not (tmp_path / "out.previous").exists()  # --resume auto took the run for this one
