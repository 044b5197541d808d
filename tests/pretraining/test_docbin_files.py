""".spacy (DocBin) corpus files: documents read from an index on, and files that would
inflate past their bound refused before spaCy inflates them."""
import re
import zlib

import pytest
from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

from spacy_elmo.errors import InputError
from spacy_elmo.pretraining import docbin_files
from spacy_elmo.pretraining.docbin_files import TooLarge, inflated_size, read_docbin

TEXTS = [["a", "first", "doc"], ["the", "second"], ["and", "a", "third", "one"]]


@pytest.fixture()
def docbin_path(tmp_path):
    path = tmp_path / "corpus.spacy"
    DocBin(docs=[Doc(Vocab(), words=words) for words in TEXTS]).to_disk(path)
    return path


def test_read_docbin_yields_each_doc_from_start_with_the_index_after_it(docbin_path):
    read = [([t.text for t in doc], next_start, next_line) for doc, next_start, next_line in read_docbin(docbin_path, 1)]
    assert read == [(TEXTS[1], 2, 2), (TEXTS[2], 3, 3)]
    assert list(read_docbin(docbin_path, 3)) == []


def test_corrupt_spacy_file(tmp_path):
    (tmp_path / "x.spacy").write_bytes(b"not msgpack at all")
    with pytest.raises(InputError, match=r"x.spacy: not a readable .spacy \(DocBin\) file \("):
        list(read_docbin(tmp_path / "x.spacy", 0))


def test_a_truncated_or_missing_file_is_an_input_error_naming_it(tmp_path, docbin_path):
    truncated = tmp_path / "cut.spacy"
    truncated.write_bytes(docbin_path.read_bytes()[:40])
    for path in (truncated, tmp_path / "missing.spacy"):
        with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: not a readable .spacy \(DocBin\) file \("):
            list(read_docbin(path, 0))


def test_a_file_inflating_past_its_bound_is_refused_as_too_large_before_spacy_reads_it(docbin_path, monkeypatch):
    monkeypatch.setattr(docbin_files, "INFLATION_FLOOR_BYTES", 0)
    monkeypatch.setattr(docbin_files, "MAX_INFLATION", 1)  # any compressed DocBin inflates past its own size
    monkeypatch.setattr(DocBin, "from_bytes", lambda *args: pytest.fail("spaCy inflated the file"))
    with pytest.raises(TooLarge, match=rf"^{re.escape(str(docbin_path))}: inflates to over .* MB, more than 1 times its .* MB \(plus 0 MiB\)"):
        next(read_docbin(docbin_path, 0))
    assert issubclass(TooLarge, InputError)


def test_inflated_size_is_the_whole_inflated_size_when_under_the_limit():
    data = zlib.compress(b"spacy-elmo " * 50_000)
    assert inflated_size(data, 10**6) == 550_000
    assert inflated_size(data, 550_000) == 550_000


def test_inflated_size_stops_counting_within_one_megabyte_past_the_limit():
    data = zlib.compress(bytes(64 << 20), 9)  # 64 MiB of zeros in about 65 KB
    size = inflated_size(data, 1000)
    assert 1000 < size <= 1000 + (1 << 20)
