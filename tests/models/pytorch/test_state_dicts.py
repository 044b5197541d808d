"""Reading a state dict from a damaged or hostile file: no code runs, and only exactly
the expected tensors, of their shapes, dense, real and finite, are taken."""
import io
import re
import zipfile

import pytest
import torch

from spacy_elmo.errors import WeightsError
from spacy_elmo.models.pytorch.state_dicts import (
    check_state_dict,
    check_tensor,
    check_uncompressed,
    read_state_dict,
)

SHAPES = {"weight": (3, 4), "bias": (3,), "steps": ()}


def _state():
    return {"weight": torch.randn(3, 4), "bias": torch.zeros(3), "steps": torch.tensor(7)}


def _saved(state) -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return buffer


class _Payload:
    """Unpickling this creates a file: code run by loading the weights."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_read_state_dict_returns_the_saved_tensors_from_a_stream_or_a_file(tmp_path):
    state = _state()
    torch.save(state, tmp_path / "weights.pt")
    for source in (_saved(state), tmp_path / "weights.pt"):
        read = read_state_dict(source, SHAPES, "model")
        assert read.keys() == state.keys() and all(torch.equal(read[k], state[k]) for k in state)


def test_bytes_that_are_not_torch_weights_cannot_be_read_safely():
    with pytest.raises(WeightsError, match=r"^model: the weights cannot be read safely \(.+\)$"):
        read_state_dict(io.BytesIO(b"not a torch file"), SHAPES, "model")


def test_a_pickle_in_the_file_is_refused_and_never_run(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # as torch < 2.6 loads
    marker = tmp_path / "ran"
    with pytest.raises(WeightsError, match=r"^model: the weights cannot be read safely"):
        read_state_dict(_saved({**_state(), "weight": _Payload(str(marker))}), SHAPES, "model")
    assert not marker.exists()


@pytest.mark.parametrize("state", [[torch.zeros(3)], {"weight": 1.0}, torch.zeros(3)])
def test_anything_but_a_dict_of_tensors_is_refused(state):
    with pytest.raises(WeightsError, match=r"^model: the weights are not a state dict of tensors$"):
        check_state_dict(state, SHAPES, "model")


def test_missing_and_unexpected_names_are_refused_listing_the_first_three_of_each():
    state = {"bias": torch.zeros(3), **{f"extra{i}": torch.zeros(1) for i in range(5)}}
    message = "model: its settings and weights disagree (missing ['steps', 'weight'], unexpected ['extra0', 'extra1', 'extra2'])"
    with pytest.raises(WeightsError, match=f"^{re.escape(message)}$"):
        check_state_dict(state, SHAPES, "model")


def test_a_tensor_of_another_shape_is_refused_naming_both_shapes():
    with pytest.raises(WeightsError, match=r"^model: 'weight' has shape \(4, 3\), but its settings say \(3, 4\)$"):
        check_state_dict({**_state(), "weight": torch.zeros(4, 3)}, SHAPES, "model")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_values_are_refused(value):
    bias = torch.tensor([0.0, value, 0.0])
    with pytest.raises(WeightsError, match=r"^model: 'bias' holds values that are not finite \(NaN or inf\)"):
        check_state_dict({**_state(), "bias": bias}, SHAPES, "model")


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
@pytest.mark.parametrize("kind,tensor", [
    ("sparse", lambda: torch.zeros(3).to_sparse()),
    ("quantized", lambda: torch.quantize_per_tensor(torch.zeros(3), 0.1, 0, torch.quint8)),
    ("meta (no data)", lambda: torch.zeros(3, device="meta")),
    ("complex", lambda: torch.zeros(3, dtype=torch.complex64)),
])
def test_tensors_that_are_not_dense_real_numbers_are_refused_naming_their_kind(kind, tensor):
    message = f"model: 'bias' is a {kind} tensor, not dense real numbers"
    with pytest.raises(WeightsError, match=f"^{re.escape(message)}"):
        check_state_dict({**_state(), "bias": tensor()}, SHAPES, "model")


def test_dense_real_tensors_of_any_dtype_pass_check_tensor():
    for tensor in (torch.zeros(2), torch.zeros(2, dtype=torch.int64), torch.zeros(2, dtype=torch.bfloat16)):
        check_tensor("t", tensor, "model")


def _recompressed(buffer: io.BytesIO) -> io.BytesIO:
    """The records of `buffer` deflated: what torch.load reads but torch.save never writes."""
    out = io.BytesIO()
    with zipfile.ZipFile(buffer) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            target.writestr(info.filename, source.read(info))
    out.seek(0)
    return out


def test_a_compressed_record_is_refused_before_it_inflates():
    bomb = _recompressed(_saved({**_state(), "junk": torch.zeros(1_000_000)}))
    assert len(bomb.getvalue()) < 20_000  # 4 MB of zeros in a few KB
    with pytest.raises(WeightsError, match=r"^model: its record .*/data.pkl is compressed, which torch.save never does"):
        read_state_dict(bomb, SHAPES, "model")


def test_records_larger_than_the_tensors_need_are_refused_before_reading():
    with pytest.raises(WeightsError, match=r"^model: its records take [\d,]+ bytes, more than the 1,048,704 its tensors need"):
        read_state_dict(_saved({**_state(), "junk": torch.zeros(1_000_000)}), SHAPES, "model")


def test_what_torch_save_writes_passes_and_the_stream_is_read_from_its_start():
    buffer = _saved(_state())
    check_uncompressed(buffer, "model", max_bytes=1 << 20)
    assert buffer.tell() == 0
    assert set(read_state_dict(buffer, SHAPES, "model")) == set(SHAPES)
    check_uncompressed(io.BytesIO(b"not a zip: torch's older layout"), "model")  # left to torch.load
