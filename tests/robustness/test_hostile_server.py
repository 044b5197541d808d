"""Downloads by name (`embed --weights small`) from a hostile server on 127.0.0.1:
one line, exit code 1, and nothing left in the cache or anywhere else."""
import json
import shutil
from pathlib import Path

import h5py
import pytest

from spacy_elmo import download as download_module
from spacy_elmo.named_models import NAMED_MODELS

from ..test_download import (
    TruncatingHandler, _drip_body, _drip_headers, _endless, _handler, _redirect_to, _slow, closed_port_url, serving,
)
from .conftest import Probe, run_probe
from .test_model_files import no_large_reads, size_bomb, write_declared_only  # noqa: F401 (an autouse fixture)

SMALL = NAMED_MODELS["small"]
# The fixture biLM stands for the published models.
pytestmark = pytest.mark.usefixtures("fixture_as_published")


def _status(code: int):
    def respond(handler) -> None:
        handler.send_response(code)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return _handler(respond)


def _content_length(value: str):
    def respond(handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", value)
        handler.end_headers()

    return _handler(respond)


def _layout(root: Path, model_dir: Path, *, options=None, weights=None) -> Path:
    """The fixture biLM where AllenNLP keeps `small`, optionally with other bytes, or
    changed by a function of the file's path."""
    folder = root / SMALL.folder
    folder.mkdir(parents=True)
    options_name, weights_name = SMALL.file_names()
    shutil.copy(model_dir / "options.json", folder / options_name)
    shutil.copy(model_dir / "lm_weights.hdf5", folder / weights_name)
    for change, path in ((options, folder / options_name), (weights, folder / weights_name)):
        if callable(change):
            change(path)
        elif change is not None:
            path.write_bytes(change)
    return root


def _options_beside(weights: Path) -> dict:
    return json.loads(weights.with_name(SMALL.file_names()[0]).read_text())


def _bomb_options(path: Path) -> None:
    path.write_text(json.dumps(size_bomb(json.loads(path.read_text()))))


def _bomb_weights(path: Path) -> None:
    """Datasets of a 50,000-wide LSTM, declared and never written: a few KB."""
    write_declared_only(path, size_bomb(_options_beside(path)))


def _nan_clip(path: Path) -> None:
    options = json.loads(path.read_text())
    options["lstm"]["cell_clip"] = float("nan")
    path.write_text(json.dumps(options))


def _external_bias(path: Path) -> None:
    """`CNN/b_cnn_0` keeps its bytes in a file beside, which the server does not send."""
    outside = path.with_name("outside.bin")
    with h5py.File(path, "r+") as handle:
        shape = handle["CNN/b_cnn_0"].shape
        outside.write_bytes(b"\x01" * 4 * shape[0])
        del handle["CNN/b_cnn_0"]
        handle.create_dataset("CNN/b_cnn_0", shape=shape, dtype="float32", external=[(str(outside), 0, 4 * shape[0])])


def _other_projection(path: Path) -> None:
    """Options that pass every check, of another size than the weights beside them."""
    options = json.loads(path.read_text())
    options["lstm"]["projection_dim"] *= 2
    path.write_text(json.dumps(options))


# The base URLs of the rows without a server ("closed..."): a closed port ({}: host:port), spelled so.
CLOSED = {
    "closed": "http://{}",
    "closed-with-password": "http://alice:s3cret@{}",
    "closed-with-@-in-password": "http://alice:pa@s3cret@{}",
    "closed-with-token": "http://{}/elmo?token=s3cret",
    "closed-with-space-in-password": "http://us er:s3cret x@{}",
    "closed-with-/-in-password": "http://alice:x/s3cret@{}",
    "closed-with-/-in-user": "http://s3cret/x:y@{}",
    "closed-with-#-in-password": "http://alice:s3cret#x@{}",
    "closed-ipv6-unclosed": "http://[::1",
}


# name, handler, served layout (None: nothing), message
SERVERS = [
    ("404", None, None, "HTTP 404"),
    ("500", _status(500), None, "HTTP 500"),
    ("a truncated body", TruncatingHandler, {}, "Incomplete download of"),
    ("Content-Length: abc", _content_length("abc"), None, "invalid Content-Length ('abc')"),
    ("HTML instead of HDF5", None, {"weights": b"<html><body>Sign in</body></html>"}, "weights"),
    ("[] as options", None, {"options": b"[]"}, "_options.json: the options must be an object, got []"),
    ("a redirect to ftp://", _redirect_to("ftp://127.0.0.1/elmo_weights.hdf5"), None, "which is not http(s); refused"),
    ("a redirect to a closed host", "closed-redirect", None, "Could not download"),
    ("a body that never ends", _handler(_endless), None, "sent more than 1,048,576 bytes"),
    ("a body one byte at a time", _handler(_slow), None, "took longer than 0.5 s"),
    ("a byte every 0.2 s of 1,000 announced", _handler(_drip_body), None, "took longer than 0.5 s"),
    ("headers a byte every 0.2 s", _handler(_drip_headers), None, "took longer than 0.5 s (0 bytes so far)"),
    ("options declare a 75 GiB biLM", None, {"options": _bomb_options, "weights": _bomb_weights},
     "_options.json: describes a biLM of 90,007,115,232 parameters, more than the 400,000,000 spacy-elmo loads"),
    ("weights declare 75 GiB", None, {"weights": _bomb_weights},
     "_weights.hdf5: dataset 'CNN_proj/W_proj' has shape (124, 50000), but from"),
    ("options nested 200,000 deep, served", None, {"options": b"[" * 200_000 + b"]" * 200_000},
     "_options.json: not valid JSON (nested too deeply)"),
    ("options with cell_clip NaN", None, {"options": _nan_clip}, "lstm.cell_clip must be a finite number, got nan"),
    ("weights read a file beside them", None, {"weights": _external_bias},
     "_weights.hdf5: dataset 'CNN/b_cnn_0' keeps its data in an outside file; refused"),
    ("no server", "closed", None, "Could not download"),
    ("no server, a password in the base URL", "closed-with-password", None, "http://***@127.0.0.1"),
    ("no server, an @ in the password", "closed-with-@-in-password", None, "http://***@127.0.0.1"),
    ("no server, a token in the base URL", "closed-with-token", None,
     "/elmo/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_options.json?token=***"),
    ("no server, a space in the password", "closed-with-space-in-password", None,
     "from http://***@127.0.0.1:PORT/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_options.json: "
     "the base URL holds a space or a control character; a space, '/', '?', '#' or '@' in its user name or password "
     "must be percent-encoded"),
    ("no server, a / in the password", "closed-with-/-in-password", None,
     "from http://***@127.0.0.1:PORT/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_options.json: "
     "the base URL has an invalid host or port"),
    ("no server, a / in the user name", "closed-with-/-in-user", None,
     "from http://***@127.0.0.1:PORT/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_options.json: "
     "the base URL holds an '@' after its host"),
    ("no server, a # in the password", "closed-with-#-in-password", None,
     "from http://***@127.0.0.1:PORT: the base URL has an invalid host or port"),
    ("base URL http://[::1", "closed-ipv6-unclosed", None,
     "from http://[::1/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_options.json: "
     "the base URL has an invalid host or port"),
    ("options and weights of two sizes", None, {"options": _other_projection},
     "_weights.hdf5: dataset 'CNN_proj/W_proj' has shape (124, 16), but from"),
]


@pytest.mark.parametrize("name,handler,layout,message", SERVERS, ids=[s[0] for s in SERVERS])
def test_a_hostile_server_gives_one_line_and_leaves_nothing(
    name, handler, layout, message, workspace, allennlp_model_dir, tmp_path, capsys, monkeypatch
):
    served = tmp_path / "served"
    served.mkdir()
    if layout is not None:
        _layout(served, allennlp_model_dir, **layout)
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(workspace / "cache"))
    # A short deadline only where the deadline is what the row tests: a busy machine may take
    # longer than 0.5 s to serve the others.
    monkeypatch.setattr(download_module, "DEADLINE_S", 0.5 if "took longer than" in message else 60)
    probe = Probe(name, lambda ws: ["embed", "text.txt", "out.hdf5", "--weights", "small"], message, absent="s3cret")
    if handler in CLOSED:
        host = closed_port_url()[len("http://"):]
        monkeypatch.setenv("SPACY_ELMO_BASE_URL", CLOSED[handler].format(host))
        probe.message = message.replace("PORT", host.rpartition(":")[2])
        run_probe(probe, workspace, capsys, monkeypatch)
        return
    if handler == "closed-redirect":
        handler = _redirect_to(closed_port_url() + "/elmo.hdf5")
    with serving(served, *([handler] if handler else [])) as url:
        monkeypatch.setenv("SPACY_ELMO_BASE_URL", url)
        run_probe(probe, workspace, capsys, monkeypatch)


def _html_everywhere(handler) -> None:
    """A sign-in page, whatever the path: what a server sends when the signature is wrong."""
    body = b"<html><body>Sign in</body></html>"
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_a_query_in_the_base_url_follows_each_files_path_and_every_file_is_checked(
    workspace, allennlp_model_dir, tmp_path, capsys, monkeypatch
):
    """`?sig=...` stays the query (it was once glued before the path, and what came back
    skipped the checks and was cached); a page in place of a file is refused, as always."""
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(workspace / "cache"))
    probe = Probe(
        "a query in the base URL, a page for every file",
        lambda ws: ["embed", "text.txt", "out.hdf5", "--weights", "small"],
        "_options.json?sig=***: not valid JSON", absent="s3cret",
    )
    with serving(tmp_path, _handler(_html_everywhere)) as url:
        monkeypatch.setenv("SPACY_ELMO_BASE_URL", f"{url}/elmo?sig=s3cret")
        run_probe(probe, workspace, capsys, monkeypatch)
