"""Downloads by name (`embed --weights small`) from a hostile server on 127.0.0.1:
one line, exit code 1, and nothing left in the cache or anywhere else."""
import shutil
from pathlib import Path

import pytest

from spacy_elmo import download as download_module
from spacy_elmo.named_models import NAMED_MODELS

from ..test_download import TruncatingHandler, _endless, _handler, _redirect_to, _slow, closed_port_url, serving
from .conftest import Probe, run_probe

SMALL = NAMED_MODELS["small"]


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


def _layout(root: Path, model_dir: Path, *, options: bytes = None, weights: bytes = None) -> Path:
    """The fixture biLM where AllenNLP keeps `small`, optionally with other bytes."""
    folder = root / SMALL.folder
    folder.mkdir(parents=True)
    options_name, weights_name = SMALL.file_names()
    shutil.copy(model_dir / "options.json", folder / options_name)
    shutil.copy(model_dir / "lm_weights.hdf5", folder / weights_name)
    if options is not None:
        (folder / options_name).write_bytes(options)
    if weights is not None:
        (folder / weights_name).write_bytes(weights)
    return root


# name, handler, served layout (None: nothing), message
SERVERS = [
    ("404", None, None, "HTTP 404"),
    ("500", _status(500), None, "HTTP 500"),
    ("a truncated body", TruncatingHandler, {}, "Incomplete download of"),
    ("Content-Length: abc", _content_length("abc"), None, "invalid Content-Length ('abc')"),
    ("HTML instead of HDF5", None, {"weights": b"<html><body>Sign in</body></html>"}, "weights"),
    ("[] as options", None, {"options": b"[]"}, "is not a biLM options file"),
    ("a redirect to ftp://", _redirect_to("ftp://127.0.0.1/elmo_weights.hdf5"), None, "which is not http(s); refused"),
    ("a redirect to a closed host", "closed-redirect", None, "Could not download"),
    ("a body that never ends", _handler(_endless), None, "sent more than 1,048,576 bytes"),
    ("a body one byte at a time", _handler(_slow), None, "took longer than 0.5 s"),
    ("no server", "closed", None, "Could not download"),
    ("no server, a password in the base URL", "closed-with-password", None, "http://***@127.0.0.1"),
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
    monkeypatch.setattr(download_module, "DEADLINE_S", 0.5)
    probe = Probe(name, lambda ws: ["embed", "text.txt", "out.hdf5", "--weights", "small"], message, absent="s3cret")
    if handler in ("closed", "closed-with-password", "closed-redirect"):
        target = closed_port_url()
        if handler != "closed-redirect":
            password = "alice:s3cret@" if handler == "closed-with-password" else ""
            monkeypatch.setenv("SPACY_ELMO_BASE_URL", target.replace("http://", "http://" + password))
            run_probe(probe, workspace, capsys, monkeypatch)
            return
        handler = _redirect_to(target + "/elmo.hdf5")
    with serving(served, *([handler] if handler else [])) as url:
        monkeypatch.setenv("SPACY_ELMO_BASE_URL", url)
        run_probe(probe, workspace, capsys, monkeypatch)
