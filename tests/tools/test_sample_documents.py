"""tools/sample_documents.py: whole documents, spread over the file, the rest disjoint."""
from pathlib import Path

from ..project.conftest import REPO, load_script

sample_documents = load_script("sample_documents", folder="tools")


def test_sample_documents_takes_whole_documents_and_the_rest_is_disjoint(tmp_path: Path):
    source = REPO / "assets/uner_english_ewt/en_ewt-uner-demo-dev.iob2"
    documents = sample_documents.read_documents(source)
    chosen, rest = sample_documents.select_documents(documents, 200)
    assert sorted(chosen + rest) == list(range(len(documents)))
    n_chosen = sum(len(documents[i]) for i in chosen)
    assert 150 <= n_chosen <= 250
    assert chosen[0] < len(documents) // 4 and chosen[-1] > 3 * len(documents) // 4  # spread over the file
    sample_documents.write_documents(documents, chosen, tmp_path / "a.iob2")
    sample_documents.write_documents(documents, rest, tmp_path / "b.iob2")

    def lines(path: Path):
        return [line for line in path.read_text(encoding="utf8").splitlines() if line]

    assert sorted(lines(tmp_path / "a.iob2") + lines(tmp_path / "b.iob2")) == sorted(lines(source))
