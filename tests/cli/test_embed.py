"""`spacy-elmo embed`: HDF5 layout, values, bad input and atomic output."""
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Sequence, Tuple

import h5py
import numpy
import pytest
import torch


import spacy_elmo.models.pytorch.embedder as embedder_module
from spacy_elmo.cli.embed import PROGRESS_MIN_LINES
from spacy_elmo.models.loaders import find_model
from spacy_elmo.models.pytorch.embedder import bytes_per_token, max_tokens_per_line
from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids
from spacy_elmo.models.pytorch.embedder import ElmoEmbedder
from spacy_elmo.models.pytorch.original_format import load_bilm, read_options, save_bilm
from spacy_elmo.output_files import _host

from ..conftest import run_cli

SENTENCES = [
    "The cat sat on the mat .",
    "Colorless green ideas sleep furiously",
    "ELMo é ótimo ☃ !",
    "The cat sat on the mat .",  # a repeat maps to its last index, as in AllenNLP
    "Short",
]


@pytest.fixture(scope="module")
def weights_file(allennlp_model_dir: Path) -> Path:
    return allennlp_model_dir / "lm_weights.hdf5"


@pytest.fixture()
def reference(fixture_bilm):
    """Embed token lists directly with `ElmoEmbedder`: what the command must write."""
    embedder = ElmoEmbedder(fixture_bilm)

    def embed(sentences: Sequence[List[str]]) -> List[numpy.ndarray]:
        return list(embedder.embed(sentences))

    return embed


def run_embed(capsys, monkeypatch, *args) -> Tuple[int, str, str]:
    return run_cli(capsys, monkeypatch, "embed", *args)


def write_lines(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf8")
    return path


def read_output(path: Path) -> Tuple[List[numpy.ndarray], dict]:
    with h5py.File(path, "r") as handle:
        mapping_dataset = handle["sentence_to_index"]
        assert mapping_dataset.shape == (1,)
        assert h5py.check_string_dtype(mapping_dataset.dtype) is not None
        raw = mapping_dataset[0]
        mapping = json.loads(raw.decode("utf8") if isinstance(raw, bytes) else raw)
        keys = set(handle) - {"sentence_to_index"}
        assert keys == {str(i) for i in range(len(keys))}
        arrays = [handle[str(i)][...] for i in range(len(keys))]
    assert all(array.dtype == numpy.float32 for array in arrays)
    return arrays, mapping


def one_message(text: str) -> str:
    """The printed error with wrapped lines joined again."""
    return " ".join(text.split())


def test_embed_matches_embedder(tmp_path, capsys, monkeypatch, weights_file, reference):
    input_path = write_lines(tmp_path / "in.txt", SENTENCES)
    output_path = tmp_path / "new" / "dir" / "out.hdf5"  # missing directories are created
    code, out, err = run_embed(capsys, monkeypatch, input_path, output_path, "--weights", weights_file)
    assert code == 0, out + err
    arrays, mapping = read_output(output_path)
    expected = reference([s.split() for s in SENTENCES])
    assert len(arrays) == len(expected)
    for array, want in zip(arrays, expected):
        assert array.shape == want.shape
        numpy.testing.assert_allclose(array, want, rtol=1e-5, atol=1e-6)
    assert arrays[0].shape == (3, 7, 32)
    assert mapping == {
        "The cat sat on the mat .": "3",
        "Colorless green ideas sleep furiously": "1",
        "ELMo é ótimo ☃ !": "2",
        "Short": "4",
    }
    n_tokens = sum(len(s.split()) for s in SENTENCES)
    summary = out.strip().splitlines()
    assert len(summary) == 1
    assert f"{len(SENTENCES)} sentences, {n_tokens} tokens" in summary[0]
    assert "tokens/s" in summary[0]
    assert err == ""  # no warning, and no progress bar for a short input
    assert sorted(p.name for p in output_path.parent.iterdir()) == ["out.hdf5"]


@pytest.mark.parametrize("flag", ["--top", "--average"])
def test_top_and_average(tmp_path, capsys, monkeypatch, weights_file, reference, flag):
    input_path = write_lines(tmp_path / "in.txt", SENTENCES[:3])
    output_path = tmp_path / "out.hdf5"
    code, out, err = run_embed(
        capsys, monkeypatch, input_path, output_path, "--weights", weights_file, flag, "--batch-size", "2"
    )
    assert code == 0, out + err
    arrays, _ = read_output(output_path)
    for array, layers in zip(arrays, reference([s.split() for s in SENTENCES[:3]])):
        want = layers[-1] if flag == "--top" else layers.mean(axis=0)
        assert array.shape == (layers.shape[1], 32)
        numpy.testing.assert_allclose(array, want, rtol=1e-5, atol=1e-6)


def test_top_and_average_together_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch, weights_file):
    input_path = write_lines(tmp_path / "in.txt", SENTENCES[:1])
    code, out, err = run_embed(
        capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights_file, "--top", "--average"
    )
    assert (code, out, err) == (1, "", "✘ give at most one of --top and --average\n")
    assert not (tmp_path / "out.hdf5").exists()


def test_a_dash_reads_standard_input(tmp_path, capsys, monkeypatch, weights_file, reference):
    """`embed - OUT` embeds what is piped in, as a file would be (its empty lines named as <stdin>'s)."""
    text = "".join(line + "\n" for line in [*SENTENCES[:2], ""])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    code, out, err = run_embed(capsys, monkeypatch, "-", tmp_path / "out.hdf5", "--weights", weights_file)
    assert code == 0, out + err
    assert err == "⚠ <stdin>: line 3 is empty (written as empty datasets of shape (3, 0, 32))\n"
    arrays, mapping = read_output(tmp_path / "out.hdf5")
    for array, want in zip(arrays, reference([s.split() for s in SENTENCES[:2]])):
        numpy.testing.assert_allclose(array, want, rtol=1e-5, atol=1e-6)
    assert mapping == {SENTENCES[0]: "0", SENTENCES[1]: "1"} and arrays[2].shape == (3, 0, 32)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.hdf5"]


def test_model_directory_and_explicit_options(
    tmp_path, capsys, monkeypatch, allennlp_model_dir, fixture_bilm, reference
):
    input_path = write_lines(tmp_path / "in.txt", SENTENCES[:2])
    expected = reference([s.split() for s in SENTENCES[:2]])
    model_dir = tmp_path / "model"
    save_bilm(fixture_bilm, model_dir)
    code, out, err = run_embed(capsys, monkeypatch, input_path, tmp_path / "a.hdf5", "--weights", model_dir)
    assert code == 0, out + err
    # Weights alone in a directory without options.json: --options names it.
    lone = tmp_path / "lone" / "my_weights.hdf5"
    lone.parent.mkdir()
    shutil.copy(allennlp_model_dir / "lm_weights.hdf5", lone)
    code, out, err = run_embed(
        capsys, monkeypatch, input_path, tmp_path / "b.hdf5",
        "--weights", lone, "--options", allennlp_model_dir / "options.json",
    )
    assert code == 0, out + err
    for name in ("a.hdf5", "b.hdf5"):
        arrays, _ = read_output(tmp_path / name)
        for array, want in zip(arrays, expected):
            numpy.testing.assert_allclose(array, want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_cli_as_subprocess(tmp_path, weights_file, reference):
    input_path = write_lines(tmp_path / "in.txt", SENTENCES[:2])
    output_path = tmp_path / "out.hdf5"
    command = [sys.executable, "-m", "spacy_elmo", "embed", str(input_path), str(output_path),
               "--weights", str(weights_file), "--average"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 sentences, 12 tokens" in done.stdout
    arrays, mapping = read_output(output_path)
    for array, layers in zip(arrays, reference([s.split() for s in SENTENCES[:2]])):
        numpy.testing.assert_allclose(array, layers.mean(axis=0), rtol=1e-5, atol=1e-6)
    assert mapping == {SENTENCES[0]: "0", SENTENCES[1]: "1"}


def test_missing_input(tmp_path, capsys, monkeypatch, weights_file):
    missing = tmp_path / "nope.txt"
    code, out, err = run_embed(capsys, monkeypatch, missing, tmp_path / "out.hdf5", "--weights", weights_file)
    assert code == 1
    assert f"Input file not found: {missing}" in one_message(out + err)
    assert "Traceback" not in out + err
    assert not (tmp_path / "out.hdf5").exists()


def test_undecodable_bytes_name_line_and_offset(tmp_path, capsys, monkeypatch, weights_file):
    input_path = tmp_path / "in.txt"
    input_path.write_bytes("fine line\n".encode("utf8") + b"bad \xff byte\nlater line\n")
    code, out, err = run_embed(capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights_file)
    assert code == 1
    message = one_message(out + err)
    assert f"{input_path}, line 2: not valid UTF-8" in message
    assert "\\xff" in message
    assert "byte offset 14 of the file" in message  # 10 bytes of line 1 + 4
    assert "Traceback" not in out + err
    assert list(tmp_path.iterdir()) == [input_path]


def test_empty_lines_give_empty_datasets_and_one_warning(tmp_path, capsys, monkeypatch, weights_file, reference):
    lines = [SENTENCES[0], "", SENTENCES[1], "  \t ", SENTENCES[4]]
    input_path = write_lines(tmp_path / "in.txt", lines)
    code, out, err = run_embed(capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights_file)
    assert code == 0, out + err
    arrays, mapping = read_output(tmp_path / "out.hdf5")
    assert [a.shape for a in arrays] == [(3, 7, 32), (3, 0, 32), (3, 5, 32), (3, 0, 32), (3, 1, 32)]
    numpy.testing.assert_allclose(arrays[2], reference([SENTENCES[1].split()])[0], rtol=1e-5, atol=1e-6)
    assert mapping == {SENTENCES[0]: "0", SENTENCES[1]: "2", SENTENCES[4]: "4"}
    assert err == f"⚠ {input_path}: lines 2, 4 are empty (written as empty datasets of shape (3, 0, 32))\n"

    code, out, err = run_embed(
        capsys, monkeypatch, input_path, tmp_path / "top.hdf5", "--weights", weights_file, "--top"
    )
    assert code == 0, out + err
    arrays, _ = read_output(tmp_path / "top.hdf5")
    assert [a.shape for a in arrays] == [(7, 32), (0, 32), (5, 32), (0, 32), (1, 32)]


def test_crlf_and_byte_order_mark(tmp_path, capsys, monkeypatch, weights_file, reference):
    input_path = tmp_path / "in.txt"
    input_path.write_bytes("\ufeffHello world\r\nsecond  line \r\n".encode("utf8"))
    code, out, err = run_embed(capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights_file)
    assert code == 0, out + err
    arrays, mapping = read_output(tmp_path / "out.hdf5")
    assert mapping == {"Hello world": "0", "second  line": "1"}
    for array, want in zip(arrays, reference([["Hello", "world"], ["second", "line"]])):
        numpy.testing.assert_allclose(array, want, rtol=1e-5, atol=1e-6)


def test_very_long_token_and_line(tmp_path, capsys, monkeypatch, weights_file, reference):
    long_token = "x" * 10_000
    long_line = [f"w{i % 50}" for i in range(2_000)]
    input_path = write_lines(tmp_path / "in.txt", [f"a {long_token} b", " ".join(long_line)])
    code, out, err = run_embed(capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights_file)
    assert code == 0, out + err
    arrays, _ = read_output(tmp_path / "out.hdf5")
    # Characters past the 48th byte are dropped, as in bilm-tf.
    truncated, w0 = reference([["a", "x" * 48, "b"], ["w0"]])
    numpy.testing.assert_allclose(arrays[0], truncated, rtol=1e-5, atol=1e-6)
    assert arrays[1].shape == (3, 2_000, 32)
    assert numpy.isfinite(arrays[1]).all()
    # Layer 0 is the context-free token layer: every "w0" in the long line matches a lone "w0".
    numpy.testing.assert_allclose(arrays[1][0, ::50], numpy.repeat(w0[0], 40, axis=0), rtol=1e-5, atol=1e-6)


def uncut_layers(bilm, words: List[str]) -> numpy.ndarray:
    """The biLM called on the whole line at once. *Shape:* ``(n_layers, n_tokens, dim)``."""
    with torch.inference_mode():
        return bilm(batch_to_char_ids([words])).layers[0].numpy()


def test_a_line_longer_than_256_tokens_is_not_cut_by_default(tmp_path, capsys, monkeypatch, weights_file, fixture_bilm):
    words = [f"w{i % 40}" for i in range(300)]
    input_path = write_lines(tmp_path / "in.txt", [" ".join(words), SENTENCES[0]])
    code, out, err = run_embed(capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights_file)
    assert code == 0, out + err
    arrays, _ = read_output(tmp_path / "out.hdf5")
    numpy.testing.assert_allclose(arrays[0], uncut_layers(fixture_bilm, words), rtol=1e-5, atol=1e-5)
    assert len(out.strip().splitlines()) == 1 and err == ""  # the summary, and no warning


def test_a_line_beyond_the_memory_bound_is_cut_with_one_warning(
    tmp_path, capsys, monkeypatch, weights_file, fixture_bilm
):
    # A bound that holds 100 tokens of the fixture biLM: --max-length auto gives 100.
    monkeypatch.setattr(embedder_module, "LINE_MEMORY_BYTES", 100 * bytes_per_token(fixture_bilm.options))
    words = [f"w{i % 40}" for i in range(250)]
    input_path = write_lines(tmp_path / "in.txt", [SENTENCES[0], " ".join(words)])
    code, out, err = run_embed(capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights_file)
    assert code == 0, out + err
    arrays, _ = read_output(tmp_path / "out.hdf5")
    spans = [uncut_layers(fixture_bilm, words[start : start + 100]) for start in (0, 100, 200)]
    numpy.testing.assert_allclose(arrays[1], numpy.concatenate(spans, axis=1), rtol=1e-5, atol=1e-5)
    summary = out.strip().splitlines()
    assert len(summary) == 1 and summary[0].startswith(f"Wrote {tmp_path / 'out.hdf5'}: 2 sentences")
    assert err.splitlines() == [
        "⚠ 1 line longer than 100 tokens (line 2) was cut into spans of 100 (--max-length auto: "
        f"{embedder_module.LINE_MEMORY_BYTES / 2**30:g} GiB of memory per line); its vectors differ from an uncut run's"
    ]


def test_an_explicit_max_length_cuts_and_says_so(tmp_path, capsys, monkeypatch, weights_file, fixture_bilm):
    lines = [" ".join(f"w{i}" for i in range(n)) for n in (12, 5, 30)]
    input_path = write_lines(tmp_path / "in.txt", lines)
    code, out, err = run_embed(
        capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights_file, "--max-length", "10"
    )
    assert code == 0, out + err
    assert err.splitlines() == [
        "⚠ 2 lines longer than 10 tokens (lines 1, 3) were cut into spans of 10 (--max-length 10); "
        "their vectors differ from an uncut run's"
    ]


def test_the_auto_bound_follows_the_model_size():
    """english-compact keeps lines of 7,825 tokens whole in 1 GiB: 137 KB a token, above its
    measured peak of 124 KB (distinct 48-byte tokens)."""
    compact = read_options(find_model("english-compact")[1])
    assert 124_000 < bytes_per_token(compact) < 150_000
    assert max_tokens_per_line(compact, 2**30) == 2**30 // bytes_per_token(compact)


def test_without_weights_the_shipped_english_model_is_used_and_named(tmp_path, capsys, monkeypatch):
    input_path = write_lines(tmp_path / "in.txt", SENTENCES[:2])
    code, out, err = run_embed(capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--top")
    assert code == 0, out + err
    assert out.strip().endswith("model english-compact (the default; --weights picks another)")
    arrays, _ = read_output(tmp_path / "out.hdf5")
    compact = load_bilm(*find_model("english-compact"))
    for array, sentence in zip(arrays, SENTENCES[:2]):
        numpy.testing.assert_allclose(array, uncut_layers(compact, sentence.split())[-1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "setup, expected",
    [
        ("missing", "Weights file not found"),
        ("not_hdf5", "not a readable HDF5 file"),
        ("bad_options", "not valid JSON"),
        ("no_options", "Options file not found"),
    ],
)
def test_bad_weights(tmp_path, capsys, monkeypatch, allennlp_model_dir, setup, expected):
    input_path = write_lines(tmp_path / "in.txt", SENTENCES[:1])
    model = tmp_path / "model"
    model.mkdir()
    weights = model / "weights.hdf5"
    if setup != "missing":
        shutil.copy(allennlp_model_dir / "lm_weights.hdf5", weights)
    if setup == "not_hdf5":
        weights.write_bytes(b"this is not HDF5\n" * 10)
    if setup != "no_options":
        shutil.copy(allennlp_model_dir / "options.json", model / "options.json")
    if setup == "bad_options":
        (model / "options.json").write_text('{"lstm": {', encoding="utf8")
    code, out, err = run_embed(capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights)
    assert code == 1
    assert expected in one_message(out + err)
    assert "Traceback" not in out + err
    assert not (tmp_path / "out.hdf5").exists()


def test_output_path_is_a_directory(tmp_path, capsys, monkeypatch, weights_file):
    input_path = write_lines(tmp_path / "in.txt", SENTENCES[:1])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, out, err = run_embed(capsys, monkeypatch, input_path, out_dir, "--weights", weights_file)
    assert code == 1
    assert f"Output path is a directory: {out_dir}" in one_message(out + err)
    assert list(out_dir.iterdir()) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without CUDA")
def test_gpu_id_without_cuda(tmp_path, capsys, monkeypatch, weights_file):
    input_path = write_lines(tmp_path / "in.txt", SENTENCES[:1])
    code, out, err = run_embed(
        capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights_file, "--gpu-id", "0"
    )
    assert code == 1
    assert "--gpu-id 0: CUDA is not available" in one_message(out + err)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_matches_cpu(tmp_path, capsys, monkeypatch, weights_file, reference):
    input_path = write_lines(tmp_path / "in.txt", SENTENCES)
    code, out, err = run_embed(
        capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights_file, "--gpu-id", "0"
    )
    assert code == 0, out + err
    arrays, _ = read_output(tmp_path / "out.hdf5")
    for array, want in zip(arrays, reference([s.split() for s in SENTENCES])):
        numpy.testing.assert_allclose(array, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, RuntimeError])
@pytest.mark.parametrize("existing", [False, True])
def test_interrupted_run_leaves_no_output(tmp_path, capsys, monkeypatch, weights_file, interruption, existing):
    """A failure halfway leaves OUTPUT as it was (absent or the old file) and no temp file."""
    input_path = write_lines(tmp_path / "in.txt", SENTENCES * 4)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    output_path = out_dir / "out.hdf5"
    if existing:
        output_path.write_bytes(b"previous result")
    original_embed = ElmoEmbedder.embed
    yielded = []

    def embed_then_fail(self, sentences, **kwargs):
        for array in original_embed(self, sentences, **kwargs):
            if len(yielded) == 10:
                raise interruption("simulated failure halfway")
            yielded.append(array)
            yield array

    monkeypatch.setattr(ElmoEmbedder, "embed", embed_then_fail)
    if interruption is KeyboardInterrupt:  # click turns Ctrl-C into "Aborted!" and exit code 130
        code, _, _ = run_embed(capsys, monkeypatch, input_path, output_path, "--weights", weights_file)
        assert code != 0
    else:
        with pytest.raises(RuntimeError, match="simulated failure"):
            run_embed(capsys, monkeypatch, input_path, output_path, "--weights", weights_file)
    assert len(yielded) == 10  # it really failed halfway through the 20 sentences
    if existing:
        assert [p.name for p in out_dir.iterdir()] == ["out.hdf5"]
        assert output_path.read_bytes() == b"previous result"
    else:
        assert list(out_dir.iterdir()) == []


def test_progress_bar_on_long_input_without_tty(tmp_path, capsys, monkeypatch, weights_file):
    n_lines = PROGRESS_MIN_LINES + 100
    input_path = write_lines(tmp_path / "in.txt", [f"word{i % 7}" for i in range(n_lines)])
    code, out, err = run_embed(
        capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights_file, "--batch-size", "64"
    )
    assert code == 0, out + err
    assert f"{n_lines}/{n_lines}" in err  # tqdm's final state, on stderr
    assert f"{n_lines}/{n_lines}" not in out
    assert f"{n_lines} sentences, {n_lines} tokens" in out
    with h5py.File(tmp_path / "out.hdf5", "r") as handle:
        assert len(handle) == n_lines + 1
        assert handle[str(n_lines - 1)].shape == (3, 1, 32)


@pytest.mark.parametrize("which", ["same file", "symlink", "hard link", "weights", "options"])
def test_an_output_that_is_an_input_is_refused(tmp_path, capsys, monkeypatch, allennlp_model_dir, which):
    model = tmp_path / "model"
    shutil.copytree(allennlp_model_dir, model, ignore=shutil.ignore_patterns("derived", "*embeddings*"))
    input_path = write_lines(tmp_path / "in.txt", SENTENCES)
    output_path = {
        "same file": input_path, "symlink": tmp_path / "link.txt", "hard link": tmp_path / "hard.txt",
        "weights": model / "lm_weights.hdf5", "options": model / "options.json",
    }[which]
    if which == "symlink":
        output_path.symlink_to(input_path)
    elif which == "hard link":
        output_path.hardlink_to(input_path)
    before = {p: p.read_bytes() for p in [input_path, model / "lm_weights.hdf5", model / "options.json"]}
    code, out, err = run_embed(capsys, monkeypatch, input_path, output_path, "--weights", model)
    assert code == 1
    assert f"Output path {output_path} is the input" in one_message(out + err)
    assert "refusing to overwrite it" in one_message(out + err)
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.parametrize("where", ["under a file", "proc"])
def test_an_impossible_output_location_fails_before_any_work(tmp_path, capsys, monkeypatch, weights_file, where):
    import spacy_elmo.cli.embed as embed_module

    input_path = write_lines(tmp_path / "in.txt", SENTENCES)
    output_path = input_path / "out.hdf5" if where == "under a file" else Path("/proc/spacy-elmo-test/out.hdf5")
    if where == "proc" and not Path("/proc").is_dir():
        pytest.skip("no /proc")

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the output location was checked")

    monkeypatch.setattr(embed_module, "load_model", no_model)
    code, out, err = run_embed(capsys, monkeypatch, input_path, output_path, "--weights", weights_file)
    message = one_message(out + err)
    assert code == 1
    assert message.startswith(f"✘ Output {output_path}:")
    expected = f"{input_path} is a file, not a directory" if where == "under a file" else "cannot write in /proc"
    assert expected in message
    assert "Traceback" not in message


def test_non_finite_weights_stop_embed_without_output(tmp_path, capsys, monkeypatch, allennlp_model_dir):
    model = tmp_path / "model"
    shutil.copytree(allennlp_model_dir, model, ignore=shutil.ignore_patterns("derived", "*embeddings*"))
    with h5py.File(model / "lm_weights.hdf5", "a") as handle:
        handle["char_embed"][0, 0] = numpy.nan
    input_path = write_lines(tmp_path / "in.txt", SENTENCES)
    code, out, err = run_embed(capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", model)
    assert code == 1
    assert "dataset 'char_embed' holds 1 non-finite value(s)" in one_message(out + err)
    assert "Wrote" not in out
    assert not (tmp_path / "out.hdf5").exists()


def test_stale_temp_files_of_the_output_are_removed(tmp_path, capsys, monkeypatch, weights_file, dead_pid):
    input_path = write_lines(tmp_path / "in.txt", SENTENCES)
    stale = tmp_path / f".out.hdf5.spacy-elmo-{dead_pid}@{_host()}-abcd1234.tmp"
    stale.write_bytes(b"half an output of a killed run")
    other = tmp_path / f".other.hdf5.spacy-elmo-{dead_pid}@{_host()}-abcd1234.tmp"  # not this run's output: kept
    other.write_bytes(b"x")
    code, out, err = run_embed(capsys, monkeypatch, input_path, tmp_path / "out.hdf5", "--weights", weights_file)
    assert code == 0, out + err
    assert not stale.exists()
    assert other.exists()


@pytest.mark.slow
def test_sigterm_removes_the_temp_file_and_publishes_nothing(tmp_path, weights_file):
    import signal
    import time

    input_path = write_lines(tmp_path / "in.txt", ["the cat sat on the mat"] * 100_000)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "spacy_elmo", "embed", str(input_path), str(out_dir / "out.hdf5"),
         "--weights", str(weights_file)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        deadline = time.monotonic() + 600
        while not list(out_dir.glob(".out.hdf5.*.tmp")):
            assert time.monotonic() < deadline and process.poll() is None, "no temp file appeared"
            time.sleep(0.05)
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode != 0, output
    assert "Wrote" not in output
    assert list(out_dir.iterdir()) == []


def test_an_output_inside_the_model_folder_is_refused_before_any_file_changes(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "model"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "elmoformanylangs" / "with_words", folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    text = write_lines(tmp_path / "in.txt", ["a b"])
    code, out, err = run_embed(capsys, monkeypatch, text, folder / "encoder.pkl", "--weights", folder)
    assert code == 1 and f"is inside the input {folder}: refusing to write among its files" in one_message(out + err)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_vectors_that_overflow_float32_are_not_written(allennlp_model_dir, tmp_path, capsys, monkeypatch):
    """Every weight finite, their products not: the command fails in one line, no output."""
    model = tmp_path / "model"
    shutil.copytree(allennlp_model_dir, model)
    with h5py.File(model / "lm_weights.hdf5", "r+") as handle:
        for name in [n for n in handle["CNN"] if n.startswith("W_cnn")]:
            handle["CNN"][name][...] = numpy.full(handle["CNN"][name].shape, 3e38, dtype="f4")
    text = write_lines(tmp_path / "in.txt", ["a b", "c"])
    output = tmp_path / "out.hdf5"
    code, out, err = run_embed(
        capsys, monkeypatch, text, output, "--weights", model / "lm_weights.hdf5", "--options", model / "options.json"
    )
    assert code == 1 and "in.txt, line 1: the biLM's vectors are not finite" in one_message(out + err)
    assert not output.exists() and "Traceback" not in err
