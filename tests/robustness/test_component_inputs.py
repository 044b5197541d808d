"""The `elmo` component on hostile settings, bytes, files and Docs: a `SpacyElmoError`
of one line (what the CLI prints without a traceback), and nothing changed on disk."""
import io
import shutil
from pathlib import Path

import pytest
import spacy
import srsly
import torch
from spacy.tokens import Doc

import spacy_elmo.pipeline  # noqa: F401 (registers the component)
from spacy_elmo.errors import SpacyElmoError
from spacy_elmo.doc_data import set_vector_hooks

from ..models.test_deferred_shim import _Payload, _state_bytes
from ..pipeline.util import TEXTS, elmo_nlp, listener_config
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


def _edit_state(data: bytes, edit) -> bytes:
    """The component's bytes with the biLM shim's inner message (settings, state, checksum) edited."""
    msg = srsly.msgpack_loads(data)
    model = srsly.msgpack_loads(msg["model"])
    node_shims = next(shims for shims in model["shims"] if shims)  # the biLM layer's one shim
    shim = srsly.msgpack_loads(node_shims[0])
    inner = srsly.msgpack_loads(shim["state"])
    edit(inner)
    shim["state"] = srsly.msgpack_dumps(inner)
    node_shims[0] = srsly.msgpack_dumps(shim)
    msg["model"] = srsly.msgpack_dumps(model)
    return srsly.msgpack_dumps(msg)


def _pickled_state(inner, marker: Path) -> None:
    state = torch.load(io.BytesIO(inner["state"]), weights_only=True)
    state[next(iter(state))] = _Payload(str(marker))
    inner["state"], inner["sha256"] = _state_bytes(state), None


def _nan_state(inner) -> None:
    state = torch.load(io.BytesIO(inner["state"]), weights_only=True)
    name = next(name for name, value in state.items() if value.is_floating_point())
    state[name] = torch.full_like(state[name], float("nan"))
    inner["state"], inner["sha256"] = _state_bytes(state), None


def _pickle_probe(pipeline: Path, workspace: Path) -> None:
    marker = workspace / "ran"
    try:
        _from_bytes(pipeline, lambda data: _edit_state(data, lambda inner: _pickled_state(inner, marker)))
    finally:
        assert not marker.exists(), "code in the pipeline's bytes ran"


def _doc_with_other_layers(pipeline: Path, edit) -> None:
    nlp = spacy.load(pipeline)
    doc = nlp(TEXTS[0])
    other = nlp(TEXTS[1])
    doc._.elmo = edit(doc, other)
    restored = Doc(nlp.vocab).from_bytes(doc.to_bytes(exclude=["user_hooks"]))
    set_vector_hooks(restored, "mean")  # the vector hooks are gone with the bytes: set them again
    restored[0].vector  # noqa: B018


def _listener_on(pipeline: Path, edit) -> None:
    nlp = spacy.load(pipeline)
    doc = nlp(TEXTS[0])
    doc._.elmo = edit(doc, nlp(TEXTS[1]))
    restored = Doc(nlp.vocab).from_bytes(doc.to_bytes(exclude=["user_hooks"]))
    nlp.get_pipe("tagger")(restored)


def _into_another_size(pipeline: Path) -> None:
    """The saved fixture-size component loaded into one whose biLM is english-compact's size."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": {"size": "compact"}}).from_disk(pipeline / "elmo")


def _complex_state(inner) -> None:
    state = torch.load(io.BytesIO(inner["state"]), weights_only=True)
    name = next(name for name, value in state.items() if value.is_floating_point())
    state[name] = state[name].to(torch.complex64)
    inner["state"], inner["sha256"] = _state_bytes(state), None


def _listener_upstream(workspace: Path, upstream: str) -> None:
    elmo_nlp(workspace / "model" / "weights.hdf5", listener=listener_config(upstream=upstream))


def _mixer_weights(workspace: Path, initial_weights) -> None:
    mixer = {"@architectures": "spacy-elmo.ScalarMix.v1", "initial_weights": initial_weights}
    elmo_nlp(workspace / "model" / "weights.hdf5", listener=listener_config(mixer=mixer))


def _not_initialized() -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp("The bank .")


PROBES = [
    ("Docs before nlp.initialize()", lambda p, ws: _not_initialized(),
     "the pipeline was not initialized. Call nlp.initialize() first"),
    ("doc_tensor 'bogus'", lambda p, ws: _component({"doc_tensor": "bogus"}), "doc_tensor"),
    ("frozen_cache_mb -1", lambda p, ws: _component({"frozen_cache_mb": -1}), "frozen_cache_mb"),
    ("token_cache_size -1", lambda p, ws: _component({"token_cache_size": -1}), "token_cache_size"),
    ("precision 'int4'", lambda p, ws: _component({"precision": "int4"}), "precision"),
    ("get_spans.max_length 0", lambda p, ws: _component({"model": {"get_spans": {"max_length": 0}}}),
     "get_spans.max_length must be a positive number of tokens, got 0"),
    ("mixer.initial_weights: 2 values for 3 layers", lambda p, ws: _mixer_weights(ws, [0.0, 1.0]),
     "mixer.initial_weights [0.0, 1.0] has 2 values, but the biLM gives 3 layers"),
    ("from_disk: a biLM of another size", lambda p, ws: _into_another_size(p),
     "has a biLM of another size: the saved elmo component has projection_dim 16 and 2 LSTM layers, "
     "the component it is loaded into has projection_dim 128 and 2 LSTM layers"),
    ("from_bytes: 64 flipped bytes", lambda p, ws: _from_bytes(p, _flip), "checksum"),
    ("from_bytes: a pickle in the state (as torch < 2.6 loads)", "pickle", "cannot be read safely"),
    ("from_bytes: 10**9 filters in its settings",
     lambda p, ws: _from_bytes(p, lambda d: _edit_state(
         d, lambda inner: inner["config"]["char_cnn"]["filters"].__setitem__(0, [1, 10**9]))),
     "the serialized elmo model: describes a biLM of 4,000,000,985,000,101,116 parameters, more than the "
     "400,000,000 spacy-elmo loads"),
    ("from_bytes: NaN weights", lambda p, ws: _from_bytes(p, lambda d: _edit_state(d, _nan_state)), "not finite"),
    ("from_bytes: cut in half", lambda p, ws: _from_bytes(p, lambda b: b[: len(b) // 2]), "damaged"),
    ("from_disk: truncated weights", lambda p, ws: _from_disk_truncated(p, ws / "copy"), "damaged"),
    ("Doc bytes: another Doc's layers, vectors",
     lambda p, ws: _doc_with_other_layers(p, lambda doc, other: other._.elmo), "holds vectors for"),
    ("Doc bytes: another Doc's layers, a listener",
     lambda p, ws: _listener_on(p, lambda doc, other: other._.elmo), "holds vectors for"),
    ("Doc bytes: not layers", lambda p, ws: _listener_on(p, lambda doc, other: "bogus"), "is not ELMo layers"),
    # Issue 60
    ("from_bytes: a complex tensor in the state", lambda p, ws: _from_bytes(p, lambda d: _edit_state(d, _complex_state)),
     "The serialized ELMo model: 'char_encoder.char_embedding' is a complex tensor, not dense real numbers"),
    ("a listener whose upstream is no component", lambda p, ws: _listener_upstream(ws, "elmo2"),
     "The ELMo listener of 'tagger' listens to 'elmo2', which is not an elmo component of this pipeline (its "
     "components: elmo, tagger; the elmo ones: elmo); set the listener's upstream to one of those, or \"*\" for any"),
]


@pytest.mark.parametrize("name,act,message", PROBES, ids=[p[0] for p in PROBES])
def test_the_component_refuses_with_one_line_and_changes_nothing(
    name, act, message, saved_pipeline, workspace, monkeypatch
):
    if act == "pickle":
        monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
        act = _pickle_probe
    before = snapshot(saved_pipeline)
    with pytest.raises(SpacyElmoError) as error:
        act(saved_pipeline, workspace)
    text = str(error.value)
    assert message in text and "\n" not in text, text
    assert snapshot(saved_pipeline) == before


@pytest.fixture(scope="session")
def saved_elmoformanylangs_pipeline(tmp_path_factory) -> Path:
    """A saved pipeline whose elmo component holds the ELMoForManyLangs fixture (with words)."""
    nlp = spacy.blank("pt")
    nlp.add_pipe("elmo")
    model = Path(__file__).resolve().parents[1] / "fixtures" / "elmoformanylangs" / "with_words"
    nlp.config["initialize"]["components"]["elmo"] = {
        "weights_loader": {"@misc": "spacy-elmo.elmo_weights.v1", "model": str(model)}
    }
    nlp.initialize()
    path = tmp_path_factory.mktemp("pipeline") / "pipeline"
    nlp.to_disk(path)
    return path


def _described(edit):
    """The model description stored beside the weights (``config.elmoformanylangs``), changed by `edit`."""
    return lambda inner: edit(inner["config"]["elmoformanylangs"])


# Issue 60: the description stored with an ELMoForManyLangs model is checked as a model folder is.
DESCRIPTIONS = [
    ("token_ids.max_chars 10**6 (3.2 GB for 3 tokens at 10**7)",
     lambda d: d["token_ids"].__setitem__("max_chars", 10**6),
     "the serialized elmo model: token_ids.max_chars is 1000000, but its options say max_characters_per_token 10"),
    ("max_characters_per_token 10**7", lambda d: d["options"].__setitem__("max_characters_per_token", 10**7),
     "the serialized elmo model: token_embedder.max_characters_per_token must be at most 1000, got 10000000"),
    ("cell_clip NaN", lambda d: d["options"].__setitem__("cell_clip", float("nan")),
     "the serialized elmo model: encoder.cell_clip must be a finite number, got nan"),
    ("cell_clip 3.5e38", lambda d: d["options"].__setitem__("cell_clip", 3.5e38),
     "the serialized elmo model: encoder.cell_clip must be a finite number (a 32-bit float, at most 3.403e+38), "
     "got 3.5e+38"),
    ("activation 'bogus'", lambda d: d["options"].__setitem__("activation", "bogus"),
     "the serialized elmo model: token_embedder.activation must be 'relu' or 'tanh', got 'bogus'"),
    ("a filter count of -4", lambda d: d["options"]["filters"][0].__setitem__(1, -4),
     "the serialized elmo model: invalid token_embedder.filters: token_embedder.filters[0][1] must be at least 1, "
     "got -4"),
    ("a character twice", lambda d: d["token_ids"]["characters"].append(d["token_ids"]["characters"][0]),
     "the serialized elmo model: its characters, entry 45: id 44 is not below the number of entries (44)"),
    ("no <oov> word", lambda d: d["token_ids"]["words"].__setitem__(0, "x"),
     "the serialized elmo model: its words: lacks the entries <oov>"),
]


@pytest.mark.parametrize("name,edit,message", DESCRIPTIONS, ids=[d[0] for d in DESCRIPTIONS])
def test_a_saved_elmoformanylangs_description_is_checked_as_a_model_folder(
    name, edit, message, saved_elmoformanylangs_pipeline, tmp_path
):
    copy = tmp_path / "pipeline"
    shutil.copytree(saved_elmoformanylangs_pipeline, copy)
    model = copy / "elmo" / "model"
    component = srsly.msgpack_dumps({"model": model.read_bytes()})  # the layout _edit_state reads
    model.write_bytes(srsly.msgpack_loads(_edit_state(component, _described(edit)))["model"])
    before = snapshot(saved_elmoformanylangs_pipeline)
    with pytest.raises(SpacyElmoError) as error:
        spacy.load(copy)("olá mundo teste")
    assert message in str(error.value) and "\n" not in str(error.value), str(error.value)
    assert snapshot(saved_elmoformanylangs_pipeline) == before
