"""The `elmo` component on hostile settings, bytes, files and Docs: a `SpacyElmoError`
of one line (what the CLI prints without a traceback), and nothing changed on disk."""
import shutil
from pathlib import Path

import pytest
import spacy
import srsly
from spacy.tokens import Doc

import spacy_elmo.pipeline  # noqa: F401 (registers the component)
from spacy_elmo.errors import SpacyElmoError

from ..pipeline.util import TEXTS
from .conftest import snapshot


def _component(settings):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config=settings)


def _flip(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0x5A for b in data[middle : middle + 64]) + data[middle + 64 :]


def _from_bytes(pipeline: Path, edit) -> None:
    nlp = spacy.load(pipeline)
    elmo = nlp.get_pipe("elmo")
    elmo.from_bytes(edit(elmo.to_bytes()))


def _from_disk_truncated(pipeline: Path, copy: Path) -> None:
    shutil.copytree(pipeline, copy)
    model = copy / "elmo" / "model"
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 3])
    spacy.load(copy)


def _doc_with_other_layers(pipeline: Path, edit) -> None:
    nlp = spacy.load(pipeline)
    doc = nlp(TEXTS[0])
    other = nlp(TEXTS[1])
    doc._.elmo = edit(doc, other)
    restored = Doc(nlp.vocab).from_bytes(doc.to_bytes(exclude=["user_hooks"]))
    nlp.get_pipe("elmo").set_annotations  # the vector hooks are gone with the bytes: set them again
    from spacy_elmo.pipeline.elmo import set_vector_hooks

    set_vector_hooks(restored, "mean")
    restored[0].vector  # noqa: B018


def _listener_on(pipeline: Path, edit) -> None:
    nlp = spacy.load(pipeline)
    doc = nlp(TEXTS[0])
    doc._.elmo = edit(doc, nlp(TEXTS[1]))
    restored = Doc(nlp.vocab).from_bytes(doc.to_bytes(exclude=["user_hooks"]))
    nlp.get_pipe("tagger")(restored)


PROBES = [
    ("doc_tensor 'bogus'", lambda p, ws: _component({"doc_tensor": "bogus"}), "doc_tensor"),
    ("frozen_cache_mb -1", lambda p, ws: _component({"frozen_cache_mb": -1}), "frozen_cache_mb"),
    ("token_cache_size -1", lambda p, ws: _component({"token_cache_size": -1}), "token_cache_size"),
    ("precision 'int4'", lambda p, ws: _component({"precision": "int4"}), "precision"),
    ("from_bytes: 64 flipped bytes", lambda p, ws: _from_bytes(p, _flip), "checksum"),
    ("from_bytes: cut in half", lambda p, ws: _from_bytes(p, lambda b: b[: len(b) // 2]), "damaged"),
    ("from_disk: truncated weights", lambda p, ws: _from_disk_truncated(p, ws / "copy"), "damaged"),
    ("Doc bytes: another Doc's layers, vectors",
     lambda p, ws: _doc_with_other_layers(p, lambda doc, other: other._.elmo), "holds vectors for"),
    ("Doc bytes: another Doc's layers, a listener",
     lambda p, ws: _listener_on(p, lambda doc, other: other._.elmo), "holds vectors for"),
    ("Doc bytes: not layers", lambda p, ws: _listener_on(p, lambda doc, other: "bogus"), "is not ELMo layers"),
]


@pytest.mark.parametrize("name,act,message", PROBES, ids=[p[0] for p in PROBES])
def test_the_component_refuses_with_one_line_and_changes_nothing(name, act, message, saved_pipeline, workspace):
    before = snapshot(saved_pipeline)
    with pytest.raises(SpacyElmoError) as error:
        act(saved_pipeline, workspace)
    text = str(error.value)
    assert message in text and "\n" not in text, text
    assert snapshot(saved_pipeline) == before
    assert not (workspace / "copy").exists() or snapshot(workspace / "copy")  # only the copy the probe made
