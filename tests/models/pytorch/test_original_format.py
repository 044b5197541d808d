"""Reading and writing the bilm-tf/AllenNLP `options.json` + `weights.hdf5` format."""
import dataclasses
import json
import shutil

import h5py
import numpy
import pytest
import torch

from spacy_elmo.errors import OptionsError, WeightsError
from spacy_elmo.models.pytorch.bilm import ElmoBiLM
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.models.pytorch.options import NAMED_SIZES
from spacy_elmo.models.pytorch.original_format import expected_shapes, load_bilm, save_bilm


def _datasets(path):
    found = {}
    with h5py.File(path, "r") as handle:
        handle.visititems(
            lambda name, obj: found.__setitem__(name, obj[...]) if isinstance(obj, h5py.Dataset) else None
        )
    return found


@pytest.mark.parametrize("model_dir", ["allennlp", "bilm-tf/model"])
def test_load_save_round_trip_is_exact(reference_dir, tmp_path, model_dir):
    source = reference_dir / model_dir
    bilm = load_bilm(source / "lm_weights.hdf5")
    options_path, weights_path = save_bilm(bilm, tmp_path / "saved")
    original, saved = _datasets(source / "lm_weights.hdf5"), _datasets(weights_path)
    assert sorted(original) == sorted(saved)
    for name, array in original.items():
        assert saved[name].dtype == array.dtype and saved[name].shape == array.shape, name
        assert saved[name].tobytes() == array.tobytes(), name
    assert json.loads(options_path.read_text()) == json.loads((source / "options.json").read_text())
    reloaded = load_bilm(tmp_path / "saved")
    for (name, a), (_, b) in zip(bilm.state_dict().items(), reloaded.state_dict().items()):
        assert torch.equal(a, b), name


def test_save_then_load_a_random_model_keeps_outputs(tmp_path):
    torch.manual_seed(1)
    bilm = ElmoBiLM(NAMED_SIZES["tiny"]).eval()
    save_bilm(bilm, tmp_path)
    reloaded = load_bilm(tmp_path).eval()
    char_ids = batch_to_char_ids([["Hello", "world", "!"], ["ELMo"]])
    with torch.no_grad():
        torch.testing.assert_close(bilm(char_ids).layers, reloaded(char_ids).layers, rtol=0, atol=0)


def test_options_as_bilm_tf_writes_them_in_training_load_as_for_inference(reference_dir, tmp_path):
    """bilm-tf trains with n_characters 261 and reads the same weights with 262 (as the
    published German model ships its options): both give the same layers."""
    source = reference_dir / "allennlp"
    shutil.copytree(source, tmp_path / "model")
    options = json.loads((source / "options.json").read_text())
    assert options["char_cnn"]["n_characters"] == 262
    options["char_cnn"]["n_characters"] = 261
    (tmp_path / "model" / "options.json").write_text(json.dumps(options))
    char_ids = batch_to_char_ids([["Olá", "mundo", "!"], ["ELMo"]])
    with torch.no_grad():
        expected = load_bilm(source / "lm_weights.hdf5").eval()(char_ids).layers
        got = load_bilm(tmp_path / "model" / "lm_weights.hdf5").eval()(char_ids).layers
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_named_sizes_have_consistent_shapes():
    original = expected_shapes(NAMED_SIZES["original"])
    assert original["CNN_high_1/W_carry"] == (2048, 2048)
    assert original["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"] == (1024, 16384)
    assert original["CNN_proj/W_proj"] == (2048, 512)
    n_params = sum(int(numpy.prod(s)) for s in original.values())
    assert n_params == pytest.approx(93.6e6, rel=0.01)  # the published 93.6M


def _copy_fixture(reference_dir, tmp_path):
    target = tmp_path / "model"
    shutil.copytree(reference_dir / "allennlp", target, ignore=shutil.ignore_patterns("derived"))
    return target


def _fixture_with_options(reference_dir, tmp_path, edit):
    """A copy of the fixture model whose options.json went through `edit(options)`."""
    model = _copy_fixture(reference_dir, tmp_path)
    options = json.loads((model / "options.json").read_text())
    edit(options)
    (model / "options.json").write_text(json.dumps(options))
    return model


def test_missing_dataset_is_named(reference_dir, tmp_path):
    model = _copy_fixture(reference_dir, tmp_path)
    with h5py.File(model / "lm_weights.hdf5", "a") as handle:
        del handle["CNN_high_1/W_carry"]
    with pytest.raises(WeightsError, match=r"missing dataset 'CNN_high_1/W_carry' \(expected shape \(124, 124\)"):
        load_bilm(model / "lm_weights.hdf5")


def test_wrong_shape_names_dataset_and_both_shapes(reference_dir, tmp_path):
    model = _fixture_with_options(reference_dir, tmp_path, lambda options: options["lstm"].update(dim=32))
    with pytest.raises(WeightsError, match=r"'RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0' has shape \(32, 256\), but from .*options.json it should be \(32, 128\)"):
        load_bilm(model / "lm_weights.hdf5")


@pytest.mark.parametrize(
    "content,message",
    [("{not json", "not valid JSON"), ('{"lstm": {}}', "missing option char_cnn.activation"),
     ('{"lstm": {"dim": 4, "n_layers": 1}, "char_cnn": {"activation": "gelu"}}', "activation")],
)
def test_bad_options(reference_dir, tmp_path, content, message):
    model = _copy_fixture(reference_dir, tmp_path)
    (model / "options.json").write_text(content)
    with pytest.raises(OptionsError, match=message):
        load_bilm(model / "lm_weights.hdf5")


@pytest.mark.parametrize(
    "section,key,value,message",
    [
        ("lstm", "n_layers", 0, "lstm.n_layers must be at least 1, got 0"),
        ("lstm", "n_layers", -2, "lstm.n_layers must be at least 1, got -2"),
        ("lstm", "dim", None, "missing option lstm.dim"),
        ("lstm", "dim", "wide", "lstm.dim must be a number, got 'wide'"),
        ("lstm", "projection_dim", 1.5, "lstm.projection_dim must be a whole number, got 1.5"),
        ("char_cnn", "n_highway", -1, "char_cnn.n_highway must be at least 0, got -1"),
        ("char_cnn", "activation", "gelu", "char_cnn.activation must be 'relu' or 'tanh', got 'gelu'"),
        ("lstm", "cell_clip", float("nan"), "lstm.cell_clip must be a finite number, got nan"),
        ("lstm", "proj_clip", float("-inf"), "lstm.proj_clip must be a finite number, got -inf"),
        ("lstm", "dim", float("inf"), "lstm.dim must be a finite number, got inf"),
        ("lstm", "n_layers", 65, "lstm.n_layers must be at most 64, got 65"),
        ("char_cnn", "n_highway", 10**30, "char_cnn.n_highway must be at most 64, got 1000000000000000000000000000000"),
        ("char_cnn", "n_characters", 260, "char_cnn.n_characters must be at least 261, got 260"),
        ("char_cnn", "filters", [[1.9, 4]], "invalid char_cnn.filters: char_cnn.filters[0][0] must be a whole "
         "number, got 1.9 (expected [[width, count], ...] with 1 <= width <= 50 and count >= 1)"),
        ("char_cnn", "filters", [[1, 4]] * 65, "invalid char_cnn.filters: char_cnn.filters has 65 filters, not 1 "
         "to 64 (expected [[width, count], ...] with 1 <= width <= 50 and count >= 1)"),
    ],
)
def test_invalid_option_values_name_their_key_once(reference_dir, tmp_path, section, key, value, message):
    def edit(options):
        if value is None:
            del options[section][key]
        else:
            options[section][key] = value

    model = _fixture_with_options(reference_dir, tmp_path, edit)
    with pytest.raises(OptionsError) as error:
        load_bilm(model / "lm_weights.hdf5")
    text = str(error.value)
    assert text == f"{model / 'options.json'}: {message}"
    assert "Error(" not in text  # the message does not quote itself


def test_options_with_fewer_layers_than_the_weights_are_refused(reference_dir, tmp_path):
    model = _fixture_with_options(reference_dir, tmp_path, lambda options: options["lstm"].update(n_layers=1))
    with pytest.raises(WeightsError, match=r"dataset 'RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B' and 5 more is not part of the biLM"):
        load_bilm(model / "lm_weights.hdf5")


def test_non_finite_weights_name_the_dataset(reference_dir, tmp_path):
    model = _copy_fixture(reference_dir, tmp_path)
    with h5py.File(model / "lm_weights.hdf5", "a") as handle:
        values = handle["char_embed"][...]
        values[3, 1] = numpy.nan
        values[7, 0] = numpy.inf
        handle["char_embed"][...] = values
    with pytest.raises(WeightsError, match=r"dataset 'char_embed' holds 2 non-finite value\(s\) \(NaN or inf\)"):
        load_bilm(model)


def test_random_bytes_over_the_middle_of_the_file_are_detected(reference_dir, tmp_path):
    model = _copy_fixture(reference_dir, tmp_path)
    weights = model / "lm_weights.hdf5"
    data = bytearray(weights.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 20_000] = numpy.random.default_rng(0).bytes(20_000)
    weights.write_bytes(bytes(data))
    with pytest.raises(WeightsError, match=r"lm_weights.hdf5: dataset '[^']+' (holds \d+ non-finite|cannot be read)"):
        load_bilm(model)


def test_missing_and_unreadable_files(reference_dir, tmp_path):
    with pytest.raises(WeightsError, match="not found"):
        load_bilm(tmp_path / "nothing.hdf5")
    model = _copy_fixture(reference_dir, tmp_path)
    (model / "options.json").unlink()
    with pytest.raises(OptionsError, match="Options file not found"):
        load_bilm(model / "lm_weights.hdf5")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "weights.hdf5").write_bytes(b"not hdf5")
    shutil.copy(reference_dir / "allennlp" / "options.json", broken)
    with pytest.raises(WeightsError, match="not a readable HDF5 file"):
        load_bilm(broken)


def _secret(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"0123456789abcdef")
    return secret


@pytest.mark.parametrize("kind", ["external storage", "external link", "soft link", "virtual"])
def test_datasets_that_point_outside_the_file_are_refused(reference_dir, tmp_path, kind):
    """A weights file must not read another file (any local file, through external storage)."""
    model = _copy_fixture(reference_dir, tmp_path)
    secret = _secret(tmp_path)
    other = tmp_path / "other.hdf5"
    with h5py.File(model / "lm_weights.hdf5", "a") as handle:
        bias = handle["CNN/b_cnn_0"]
        shape = bias.shape
        with h5py.File(other, "w") as outside:
            outside.create_dataset("b", data=numpy.ones(shape, dtype=numpy.float32))
        if kind == "external storage":
            secret.write_bytes(b"x" * 4 * shape[0])
            del handle["CNN/b_cnn_0"]
            handle.create_dataset("CNN/b_cnn_0", shape=shape, dtype="float32", external=[(str(secret), 0, 4 * shape[0])])
        elif kind == "external link":
            del handle["CNN/b_cnn_0"]
            handle["CNN/b_cnn_0"] = h5py.ExternalLink(str(other), "b")
        elif kind == "soft link":
            handle.create_dataset("copy", data=numpy.ones(shape, dtype=numpy.float32))
            del handle["CNN/b_cnn_0"]
            handle["CNN/b_cnn_0"] = h5py.SoftLink("/copy")
        else:
            layout = h5py.VirtualLayout(shape=shape, dtype="float32")
            layout[:] = h5py.VirtualSource(str(other), "b", shape=shape)
            del handle["CNN/b_cnn_0"]
            handle.create_virtual_dataset("CNN/b_cnn_0", layout)
    with pytest.raises(WeightsError, match=r"'CNN/b_cnn_0'"):
        load_bilm(model / "lm_weights.hdf5")


@pytest.mark.parametrize("which", ["weights", "options"])
def test_a_fifo_as_weights_or_options_is_refused_not_waited_on(reference_dir, tmp_path, which):
    import os

    model = _copy_fixture(reference_dir, tmp_path)
    name = "lm_weights.hdf5" if which == "weights" else "options.json"
    (model / name).unlink()
    os.mkfifo(model / name)
    error = WeightsError if which == "weights" else OptionsError
    with pytest.raises(error, match=fr"{name} is a FIFO \(named pipe\), not a regular file"):
        load_bilm(model / "lm_weights.hdf5")


def test_the_published_sizes_fit_the_loaders_bound_with_room():
    from spacy_elmo.models.pytorch.original_format import MAX_PARAMETERS, checked_options

    for name, options in NAMED_SIZES.items():
        checked_options(options.to_dict(), name)
    original = sum(int(numpy.prod(shape)) for shape in expected_shapes(NAMED_SIZES["original"]).values())
    assert 4 * original <= MAX_PARAMETERS < 5 * original
    with pytest.raises(OptionsError, match=r"^wide: describes a biLM of [\d,]+ parameters, more than the 400,000,000"):
        checked_options(dataclasses.replace(NAMED_SIZES["original"], lstm_dim=8 * 4096).to_dict(), "wide")


def test_a_chunk_far_larger_than_its_dataset_is_refused_before_it_is_read(reference_dir, tmp_path, monkeypatch):
    """HDF5 decompresses whole chunks: a resizable dataset of 4 values may declare chunks of 10**9."""
    model = _copy_fixture(reference_dir, tmp_path)
    with h5py.File(model / "lm_weights.hdf5", "a") as handle:
        shape = handle["CNN/b_cnn_0"].shape
        del handle["CNN/b_cnn_0"]
        handle.create_dataset("CNN/b_cnn_0", shape=shape, maxshape=(None,), chunks=(10**9,), dtype="float32")
    monkeypatch.setattr(h5py.Dataset, "__getitem__", lambda *args: pytest.fail("a dataset was read"))
    message = r"dataset 'CNN/b_cnn_0' declares chunks of 1,000,000,000 values, far more than its 4;"
    with pytest.raises(WeightsError, match=message):
        load_bilm(model / "lm_weights.hdf5")
