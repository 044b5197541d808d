"""tools/sample_lines.py: every N-th line, unchanged."""
from pathlib import Path

from ..project.conftest import load_script

sample_lines = load_script("sample_lines", folder="tools")


def test_every_nth_line_is_kept_unchanged(tmp_path: Path):
    source = tmp_path / "text.txt"
    source.write_text("".join(f"línea {i} com palavras\n" for i in range(1, 11)), encoding="utf8")
    sample_lines.main(source, tmp_path / "out" / "sample.txt", every=3)
    assert (tmp_path / "out" / "sample.txt").read_text(encoding="utf8") == "línea 3 com palavras\nlínea 6 com palavras\nlínea 9 com palavras\n"
