"""The README and docs a user reads: short, links that resolve, imports that work."""
import re
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


def test_the_readme_python_imports_work():
    text = (ROOT / "README.md").read_text(encoding="utf8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    imports = [line for block in blocks for line in block.splitlines() if re.match(r"(from \S+ )?import ", line)]
    assert any(line.startswith("from spacy_elmo import") for line in imports)
    for line in imports:
        exec(line, {})
