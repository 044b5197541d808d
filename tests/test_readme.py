"""The README and docs a user reads: short, links that resolve, imports that work."""
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted(ROOT.glob("spacy_elmo/resources/*/*.md"))]


def test_the_readme_reads_in_five_minutes():
    assert len((ROOT / "README.md").read_text(encoding="utf8").splitlines()) <= 250


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    text = page.read_text(encoding="utf8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"


def test_the_readme_python_runs(tmp_path, monkeypatch, reference_dir):
    """Every ```python block, as a user pastes it: the fixture biLM stands at the README's
    placeholder path, and what the blocks write lands in a fresh folder."""
    text = (ROOT / "README.md").read_text(encoding="utf8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert any("from spacy_elmo import" in block for block in blocks)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(reference_dir / "allennlp", tmp_path / "path" / "to" / "model_dir")
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"README.md, python block {number}", "exec"), {})
    assert (tmp_path / "elmo_pipeline" / "elmo").is_dir()
    assert (tmp_path / "out_dir" / "weights.hdf5").is_file()
