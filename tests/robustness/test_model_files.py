"""Hostile model files given as a directory (`embed --weights model`): sizes declared to
take all memory, numbers in options.json that are not what they must be, weights that
are not numbers, JSON nested too deep. One line, exit code 1, nothing changed, and no
dataset larger than a real biLM's is ever read."""
import json
import shutil
from pathlib import Path

import h5py
import pytest
import torch

from spacy_elmo.models.pytorch.options import BiLMOptions
from spacy_elmo.models.pytorch.original_format import expected_shapes

from .conftest import Probe, run_probe

ELMOFORMANYLANGS = Path(__file__).resolve().parents[1] / "fixtures" / "elmoformanylangs" / "with_words"
#: What a file a vocabulary links to holds: no message may show it.
SECRET = "root:x:0:0:secret-token-4711"

# More values than any dataset a probe may read: a size bomb is refused from what its files declare.
READ_LIMIT = 10**7


@pytest.fixture(autouse=True)
def no_large_reads(monkeypatch):
    """Fail the test, instead of allocating tens of GiB, if a large dataset is read."""
    read = h5py.Dataset.__getitem__

    def guarded(dataset, *args, **kwargs):
        assert (dataset.size or 0) <= READ_LIMIT, f"{dataset.name} ({dataset.size:,} values) was read"
        return read(dataset, *args, **kwargs)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", guarded)


def embed():
    return ["embed", "text.txt", "out.hdf5", "--weights", "model"]


def edit_options(ws: Path, change, name: str = "model/options.json") -> Path:
    path = ws / name
    options = json.loads(path.read_text())
    change(options)
    path.write_text(json.dumps(options))  # NaN and Infinity as Python's json writes (and reads) them
    return path


def size_bomb(options: dict) -> dict:
    """The fixture's options with a 50,000-wide LSTM: 75 GiB for one kernel."""
    options["lstm"].update(dim=50_000, projection_dim=50_000)
    return options


def write_declared_only(path: Path, options: dict) -> None:
    """Weights whose datasets have the shapes `options` imply, gzip-chunked and never
    written: a file of a few KB that declares tens of GiB."""
    path.unlink(missing_ok=True)
    with h5py.File(path, "w") as handle:
        for name, shape in expected_shapes(BiLMOptions.from_dict(options)).items():
            chunks = tuple(min(size, 64) for size in shape)
            handle.create_dataset(name, shape=shape, dtype="float32", chunks=chunks, compression="gzip")


def bomb(ws: Path) -> list:
    options = edit_options(ws, size_bomb)
    write_declared_only(ws / "model" / "weights.hdf5", json.loads(options.read_text()))
    return embed()


def replace_dataset(ws: Path, name: str, dtype) -> list:
    with h5py.File(ws / "model" / "weights.hdf5", "r+") as handle:
        shape = handle[name].shape
        del handle[name]
        handle.create_dataset(name, shape=shape, dtype=dtype)
    return embed()


def change_options(change):
    """A probe's `prepare`: the fixture's options after `change(options)`."""
    return lambda ws: (edit_options(ws, change), embed())[1]


def set_option(section: str, key: str, value):
    return change_options(lambda options: options[section].__setitem__(key, value))


def set_filter(index: int, value):
    return change_options(lambda options: options["char_cnn"]["filters"][0].__setitem__(index, value))


def write_options(content):
    """A probe's `prepare`: options.json holding `content` (text or bytes)."""
    def prepare(ws: Path) -> list:
        data = content if isinstance(content, bytes) else content.encode("utf8")
        (ws / "model" / "options.json").write_bytes(data)
        return embed()

    return prepare


def nested(depth: int) -> str:
    return '{"lstm": {}, "extra": ' + "[" * depth + "]" * depth + "}"


PROBES = [
    Probe("options declare a 50,000-wide LSTM (75 GiB)", bomb,
          "describes a biLM of 90,007,115,232 parameters, more than the 400,000,000 spacy-elmo loads"),
    Probe("options ask for 100,000 LSTM layers", set_option("lstm", "n_layers", 100_000),
          "lstm.n_layers must be at most 64, got 100000"),
    Probe("lstm.cell_clip NaN", set_option("lstm", "cell_clip", float("nan")),
          "options.json: lstm.cell_clip must be a finite number, got nan"),
    Probe("lstm.dim Infinity", set_option("lstm", "dim", float("inf")),
          "options.json: lstm.dim must be a finite number, got inf"),
    Probe("lstm.dim NaN", set_option("lstm", "dim", float("nan")),
          "options.json: lstm.dim must be a finite number, got nan"),
    Probe("lstm.dim 1e400", write_options('{"lstm": {"dim": 1e400}}'), "lstm.dim must be a finite number, got inf"),
    Probe("lstm.dim of 5,000 digits", write_options('{"lstm": {"dim": ' + "9" * 5000 + "}}"),
          "options.json: not valid JSON (Exceeds the limit (4300 digits)"),
    Probe("lstm.n_layers true", set_option("lstm", "n_layers", True), "lstm.n_layers must be a number, got True"),
    Probe("a NaN under a key the biLM does not use", change_options(lambda o: o.update(dropout=float("nan"))),
          "options.json: dropout must be a finite number, got nan"),
    Probe("a filter width of 1.9", set_filter(0, 1.9),
          "invalid char_cnn.filters: char_cnn.filters[0][0] must be a whole number, got 1.9"),
    Probe("a filter count of true", set_filter(1, True),
          "invalid char_cnn.filters: char_cnn.filters[0][1] must be a number, got True"),
    Probe("a filter count of NaN", set_filter(1, float("nan")),
          "options.json: char_cnn.filters[0][1] must be a finite number, got nan"),
    Probe("a filter of three numbers", change_options(lambda o: o["char_cnn"]["filters"][0].append(3)),
          "invalid char_cnn.filters: char_cnn.filters[0] must be [width, count], got [1, 4, 3]"),
    Probe("n_characters 5", set_option("char_cnn", "n_characters", 5),
          "char_cnn.n_characters must be at least 261, got 5"),
    Probe("options nested 200,000 deep", write_options(nested(200_000)),
          "options.json: not valid JSON (nested too deeply)"),
    Probe("options nested 100 deep", write_options(nested(100)),
          "options.json: extra[0][0]"),
    Probe("options not UTF-8", write_options(b'{"lstm": "\xff"}'), "options.json: not UTF-8 text (byte 10)"),
    Probe("weights: char_embed of strings", lambda ws: replace_dataset(ws, "char_embed", h5py.string_dtype()),
          "weights.hdf5: dataset 'char_embed' holds strings, not numbers"),
    Probe("weights: a bias of records", lambda ws: replace_dataset(ws, "CNN/b_cnn_0", [("a", "f4"), ("b", "f4")]),
          "weights.hdf5: dataset 'CNN/b_cnn_0' holds records (a compound type), not numbers"),
]


def elmoformanylangs(edit):
    """A probe's `prepare`: `embed` with the ELMoForManyLangs fixture, copied to `emfl` and `edit(emfl)`-ed."""
    def prepare(ws: Path) -> list:
        shutil.copytree(ELMOFORMANYLANGS, ws / "emfl")
        edit(ws / "emfl")
        return ["embed", "text.txt", "out.hdf5", "--weights", "emfl"]

    return prepare


def edit_model_config(change):
    return elmoformanylangs(lambda folder: edit_options(folder, change, name="cnn_6_5_8_16_sample.json"))


def link(name: str, text: str):
    """`name` in the model folder replaced by a link to a file of `text` beside the folder."""
    def edit(folder: Path) -> None:
        (folder.parent / "secret.txt").write_text(text, encoding="utf8")
        (folder / name).unlink()
        (folder / name).symlink_to(folder.parent / "secret.txt")

    return elmoformanylangs(edit)


def append_line(name: str, line: str):
    return elmoformanylangs(lambda folder: (folder / name).open("a", encoding="utf8").write(line))


def edit_tensor(change):
    """encoder.pkl with one tensor made by `change(tensor)`."""
    def edit(folder: Path) -> None:
        state = torch.load(folder / "encoder.pkl", weights_only=True)
        name = "forward_layer_0.state_linearity.bias"
        state[name] = change(state[name])
        torch.save(state, folder / "encoder.pkl")

    return elmoformanylangs(edit)


# Issue 60: model files read through links, clips beyond float32, ids that do not count, tensors that are not numbers.
PROBES += [
    Probe("lstm.cell_clip 3.5e38 (finite in float64, not float32)", set_option("lstm", "cell_clip", 3.5e38),
          "options.json: lstm.cell_clip must be a finite number (a 32-bit float, at most 3.403e+38), got 3.5e+38"),
    Probe("lstm.proj_clip 1e308", set_option("lstm", "proj_clip", 1e308),
          "options.json: lstm.proj_clip must be a finite number (a 32-bit float, at most 3.403e+38), got 1e+308"),
    Probe("ELMoForManyLangs: encoder.cell_clip 1e308", edit_model_config(lambda c: c["encoder"].update(cell_clip=1e308)),
          "cnn_6_5_8_16_sample.json: encoder.cell_clip must be a finite number (a 32-bit float, at most 3.403e+38), "
          "got 1e+308"),
    Probe("ELMoForManyLangs: word.dic links to a file of secrets", link("word.dic", SECRET + "\n"),
          "emfl/word.dic, line 1: expected an entry, a tab and its id (a whole number)", absent="secret-token"),
    Probe("ELMoForManyLangs: word.dic with an id of 5,000 digits", append_line("word.dic", "zzz\t" + "9" * 5000 + "\n"),
          "emfl/word.dic, line 32: an id of 5,000 digits, more than a vocabulary counts"),
    Probe("ELMoForManyLangs: word.dic gives two entries one id", append_line("word.dic", "zzz\t4\n"),
          "emfl/word.dic, line 32: id 4 is also the id of line 5; each entry needs an id of its own"),
    Probe("ELMoForManyLangs: a sparse tensor in encoder.pkl", edit_tensor(lambda t: t.to_sparse()),
          "emfl/encoder.pkl: 'forward_layer_0.state_linearity.bias' is a sparse tensor, not dense real numbers"),
    Probe("ELMoForManyLangs: a complex tensor in encoder.pkl", edit_tensor(lambda t: t.to(torch.complex64)),
          "emfl/encoder.pkl: 'forward_layer_0.state_linearity.bias' is a complex tensor, not dense real numbers"),
    Probe("ELMoForManyLangs: a meta tensor in encoder.pkl", edit_tensor(lambda t: t.to("meta")),
          "emfl/encoder.pkl: 'forward_layer_0.state_linearity.bias' is a meta (no data) tensor, not dense real numbers"),
]


@pytest.mark.parametrize("probe", PROBES, ids=str)
def test_hostile_model_files_give_one_line_and_change_nothing(probe, workspace, capsys, monkeypatch):
    run_probe(probe, workspace, capsys, monkeypatch)
