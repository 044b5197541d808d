"""Published models by name: downloaded once from a local server on 127.0.0.1 (the fixture
biLM under AllenNLP's URL layout), verified, cached, and reused offline."""
import contextlib
import functools
import json
import shutil
import socket
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import h5py
import numpy
import pytest

from spacy_elmo import download as download_module
from spacy_elmo import named_models
from spacy_elmo.errors import InputError, SpacyElmoError
from spacy_elmo.models.loaders import _check_loads, load_named_weights
from spacy_elmo.models.pytorch.downloaded_files import verify_download
from spacy_elmo.named_models import NAMED_MODELS



def model_files(name: str, **settings):
    """As the loaders call it: each file checked as it arrives, then the new model loaded once."""
    return named_models.model_files(name, verify=verify_download, check=functools.partial(_check_loads, name), **settings)


SMALL = NAMED_MODELS["small"]
# The fixture biLM stands for the published models.
pytestmark = pytest.mark.usefixtures("fixture_as_published")


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


class TruncatingHandler(QuietHandler):
    """Announces the full size, sends half, and hangs up."""

    def do_GET(self) -> None:
        path = Path(self.translate_path(self.path))
        data = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.close_connection = True


@contextlib.contextmanager
def serving(directory: Path, handler=QuietHandler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def published_layout(tmp_path: Path, allennlp_model_dir: Path) -> Path:
    """The fixture biLM where AllenNLP keeps `small`: FOLDER/elmo_FOLDER_{options.json,weights.hdf5}."""
    root = tmp_path / "server"
    folder = root / SMALL.folder
    folder.mkdir(parents=True)
    options_name, weights_name = SMALL.file_names()
    shutil.copy(allennlp_model_dir / "options.json", folder / options_name)
    shutil.copy(allennlp_model_dir / "lm_weights.hdf5", folder / weights_name)
    return root


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_published_model_is_downloaded_once_and_then_used_offline(
    published_layout: Path, tmp_path: Path, fixture_bilm, one_torch_thread
):
    cache = tmp_path / "cache"
    with serving(published_layout) as url:
        options, weights = model_files("small", cache=cache, url=url)
    served = published_layout / SMALL.folder
    assert options.read_bytes() == (served / SMALL.file_names()[0]).read_bytes()
    assert weights.read_bytes() == (served / SMALL.file_names()[1]).read_bytes()
    assert sorted(p.name for p in weights.parent.iterdir()) == sorted(SMALL.file_names())
    # The server is gone: the cached files are used without the network.
    assert model_files("small", cache=cache, url=closed_port_url()) == (options, weights)
    bilm = load_named_weights("small", cache_dir=cache, base_url=closed_port_url())
    import torch

    from spacy_elmo.models.pytorch.char_ids import batch_to_char_ids

    ids = batch_to_char_ids([["The", "cat", "sat", "."]])
    with torch.no_grad():
        expected = fixture_bilm(ids).layers
        got = bilm(ids).layers
    numpy.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_the_environment_sets_the_cache_and_the_base_url(published_layout: Path, tmp_path: Path, monkeypatch):
    cache = tmp_path / "env-cache"
    with serving(published_layout) as url:
        monkeypatch.setenv("SPACY_ELMO_CACHE", str(cache))
        monkeypatch.setenv("SPACY_ELMO_BASE_URL", url + "/")
        options, weights = model_files("small")
    assert options.parent == cache / SMALL.folder and weights.is_file()


def test_the_default_cache_follows_xdg_and_a_bad_base_url_is_refused(tmp_path: Path, monkeypatch):
    from spacy_elmo.named_models import cache_dir

    monkeypatch.delenv("SPACY_ELMO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "spacy-elmo"
    with pytest.raises(InputError, match="must start with http:// or https://"):
        model_files("small", cache=tmp_path / "cache", url="mirror.example")


def test_a_query_in_the_base_url_stays_the_query_of_every_file(published_layout: Path, tmp_path: Path):
    """A mirror's token or signature (`?sig=...`) follows each file's path, not the base's."""
    requested = []

    class Recording(QuietHandler):
        def do_GET(self) -> None:
            requested.append(self.path)
            super().do_GET()

    with serving(published_layout, Recording) as url:
        options, weights = model_files("small", cache=tmp_path / "cache", url=f"{url}/?sig=s3cret")
    assert requested == [f"/{path}?sig=s3cret" for path in SMALL.files]
    assert weights.read_bytes() == (published_layout / SMALL.files[1]).read_bytes()


def test_a_cache_that_cannot_be_written_is_named_before_any_download(tmp_path: Path):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    with pytest.raises(SpacyElmoError, match="cache"):
        model_files("small", cache=blocker, url=closed_port_url())


def test_offline_first_use_names_every_file_to_fetch_and_where_to_put_them(tmp_path: Path):
    cache, url = tmp_path / "cache", closed_port_url()
    with pytest.raises(InputError) as err:
        model_files("small", cache=cache, url=url)
    message = str(err.value)
    options_url, weights_url = (f"{url}/{path}" for path in SMALL.files)
    assert message.startswith(f"Could not download ELMo model 'small' from {options_url} (")
    assert f"fetch {options_url} and {weights_url} on another machine and put them in {cache / SMALL.folder};" in message
    assert "SPACY_ELMO_CACHE" in message and "\n" not in message
    assert not any(path.is_file() for path in cache.rglob("*"))
    # Options put there by hand: only the weights are left to fetch.
    (cache / SMALL.folder).mkdir(parents=True)
    shutil.copy(Path(__file__).parent / "fixtures" / "elmo_reference" / "allennlp" / "options.json",
                cache / SMALL.folder / SMALL.file_names()[0])
    with pytest.raises(InputError, match=f"fetch {weights_url} on another machine and put it in "):
        model_files("small", cache=cache, url=url)


def test_offline_an_elmoformanylangs_model_names_its_zip(tmp_path: Path):
    cache, url = tmp_path / "cache", closed_port_url()
    with pytest.raises(InputError) as err:
        model_files("elmoformanylangs-pt", cache=cache, url=url)
    assert (
        f"fetch {url}/11/168.zip on another machine and put it in {cache / 'elmoformanylangs' / 'pt'} (the .zip "
        "itself: spacy-elmo unpacks it there)" in str(err.value)
    )
    assert "options" not in str(err.value)


def test_an_interrupted_download_leaves_nothing_and_a_retry_completes(published_layout: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    with serving(published_layout, TruncatingHandler) as url:
        with pytest.raises(InputError, match="Incomplete download .*run again"):
            model_files("small", cache=cache, url=url)
    assert not any(path.is_file() for path in cache.rglob("*"))
    with serving(published_layout) as url:
        options, weights = model_files("small", cache=cache, url=url)
    assert weights.stat().st_size == (published_layout / SMALL.folder / weights.name).stat().st_size


def test_a_file_that_is_not_a_model_is_refused_and_not_cached(published_layout: Path, tmp_path: Path):
    weights = published_layout / SMALL.folder / SMALL.file_names()[1]
    weights.write_text("<html>Access denied</html>")
    cache = tmp_path / "cache"
    with serving(published_layout) as url:
        with pytest.raises(InputError, match="is not an HDF5 file"):
            model_files("small", cache=cache, url=url)
    assert not (cache / SMALL.folder / weights.name).exists()
    assert not cache.exists()  # a model arrives whole or not at all: not even its good options file stays


def test_a_missing_file_on_the_server_is_a_clear_error(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    with serving(tmp_path / "empty") as url:
        with pytest.raises(InputError, match=r"Could not download .* \(HTTP 404 "):
            model_files("medium", cache=tmp_path / "cache", url=url)


def _handler(respond):
    """A request handler whose GET is `respond(handler)`."""

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            respond(self)

    return Handler


def _redirect_to(location: str):
    def respond(handler) -> None:
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return _handler(respond)


def test_redirects_are_followed_only_to_http(tmp_path: Path):
    with serving(tmp_path, _redirect_to("ftp://127.0.0.1/elmo_weights.hdf5")) as url:
        with pytest.raises(InputError, match="redirects to ftp://127.0.0.1/elmo_weights.hdf5, which is not http"):
            model_files("small", cache=tmp_path / "cache", url=url)
    assert not any(path.is_file() for path in (tmp_path / "cache").rglob("*"))


def test_credentials_in_the_base_url_never_appear_in_messages(tmp_path: Path):
    secret_url = closed_port_url().replace("http://", "http://alice:s3cret@")
    with pytest.raises(InputError) as err:
        model_files("small", cache=tmp_path / "cache", url=secret_url)
    assert "s3cret" not in str(err.value) and "alice" not in str(err.value) and "***@" in str(err.value)
    with pytest.raises(InputError) as err:
        model_files("small", cache=tmp_path / "cache", url="ftp://bob:pw@example.org")
    assert "pw@" not in str(err.value)


def _endless(handler) -> None:
    handler.send_response(200)
    handler.end_headers()
    while True:
        try:
            handler.wfile.write(b"{" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            return


def _drip(handler, byte: bytes = b"x", *, times: int = 300, pause: float = 0.2) -> None:
    """Send `byte` `times` times, `pause` seconds apart, until the client hangs up."""
    for _ in range(times):
        try:
            handler.wfile.write(byte)
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return
        time.sleep(pause)


def _slow(handler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", "100")
    handler.end_headers()
    _drip(handler, b"{", times=100, pause=0.05)


def test_a_download_has_a_size_cap_and_a_deadline(tmp_path: Path, monkeypatch):
    with serving(tmp_path, _handler(_endless)) as url:
        with pytest.raises(InputError, match=r"sent more than 1,048,576 bytes"):
            model_files("small", cache=tmp_path / "cache", url=url)
    monkeypatch.setattr(download_module, "DEADLINE_S", 0.5)
    with serving(tmp_path, _handler(_slow)) as url:
        with pytest.raises(InputError, match=r"took longer than 0.5 s"):
            model_files("small", cache=tmp_path / "cache", url=url)
    assert not any(path.is_file() for path in (tmp_path / "cache").rglob("*"))


@pytest.mark.parametrize("length", ["abc", "-1"])
def test_an_invalid_content_length_is_one_line(tmp_path: Path, length: str):
    def respond(handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", length)
        handler.end_headers()

    with serving(tmp_path, _handler(respond)) as url:
        with pytest.raises(InputError, match=f"invalid Content-Length \\('{length}'\\)"):
            model_files("small", cache=tmp_path / "cache", url=url)


@pytest.mark.parametrize("which,content,message", [
    (0, b"[]", r"the options must be an object, got \[\]"),
    (1, b"\x89HDF\r\n\x1a\n" + b"garbage" * 100, "not a readable HDF5 file"),
    # Options are checked as the loader checks them: a 75 GiB biLM is refused before its weights are fetched.
    (0, b'{"lstm": {"dim": 50000, "projection_dim": 50000, "n_layers": 2}, "char_cnn": {"activation": "relu", '
        b'"filters": [[1, 4]], "n_highway": 1, "embedding": {"dim": 4}}}', "parameters, more than the 400,000,000"),
    (0, b"[" * 200_000 + b"]" * 200_000, r"not valid JSON \(nested too deeply\)"),
])
def test_files_that_only_look_right_are_not_cached(published_layout: Path, tmp_path: Path, which, content, message):
    (published_layout / SMALL.folder / SMALL.file_names()[which]).write_bytes(content)
    cache = tmp_path / "cache"
    with serving(published_layout) as url:
        with pytest.raises(SpacyElmoError, match=message):
            model_files("small", cache=cache, url=url)
    assert not (cache / SMALL.folder / SMALL.file_names()[which]).exists()


def test_a_damaged_cached_model_says_to_delete_it(published_layout: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    with serving(published_layout) as url:
        options, weights = model_files("small", cache=cache, url=url)
    with h5py.File(weights, "a") as handle:
        del handle["char_embed"]
    with pytest.raises(SpacyElmoError, match=rf"missing dataset 'char_embed'.* delete {weights.parent} to download it again"):
        load_named_weights("small", cache_dir=cache, base_url="http://127.0.0.1:9")


def test_a_redirect_loop_is_one_line(tmp_path: Path):
    def respond(handler) -> None:
        handler.send_response(302)
        handler.send_header("Location", handler.path)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    with serving(tmp_path, _handler(respond)) as url:
        with pytest.raises(InputError) as err:
            model_files("small", cache=tmp_path / "cache", url=url)
    assert "Could not download" in str(err.value) and "\n" not in str(err.value)


def _drip_body(handler) -> None:
    """Announces 1,000 bytes and sends one every 0.2 s (for a minute at most)."""
    handler.send_response(200)
    handler.send_header("Content-Length", "1000")
    handler.end_headers()
    _drip(handler)


def _drip_headers(handler) -> None:
    """A status line, then the headers a byte every 0.2 s (for a minute at most)."""
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    _drip(handler)




@pytest.mark.parametrize("respond", [_drip_body, _drip_headers], ids=["body", "headers"])
def test_the_deadline_bounds_the_whole_download_whatever_the_server_sends(tmp_path: Path, monkeypatch, respond):
    """A byte now and then resets a socket timeout, but never the deadline."""
    monkeypatch.setattr(download_module, "DEADLINE_S", 0.5)
    with serving(tmp_path, _handler(respond)) as url:
        started = time.monotonic()
        with pytest.raises(InputError, match=r"took longer than 0.5 s \(\d+ bytes so far\); stopped"):
            model_files("small", cache=tmp_path / "cache", url=url)
        assert time.monotonic() - started < 15  # stopped long before the server would have finished
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("url,hidden,shown", [
    ("http://alice:s3c@ret99@host/x", ["alice", "s3c", "ret99"], "http://***@host/x"),
    ("https://bob:pw@host:8443?user=x@y", ["bob", "pw"], "https://***@host:8443?user=***"),
    ("https://host/elmo/w.hdf5?X-Amz-Signature=abc123&token=t0k", ["abc123", "t0k"],
     "https://host/elmo/w.hdf5?X-Amz-Signature=***&token=***"),
    ("https://host/w.hdf5?s3cret#access_token=t0k", ["s3cret", "t0k"], "https://host/w.hdf5?***#access_token=***"),
    ("Could not download from http://u:p@h/a@b (refused)", ["u:p"], "from http://***@h/a@b (refused)"),
])
def test_redact_masks_the_user_info_and_every_query_value(url: str, hidden, shown: str):
    from spacy_elmo.download import redact

    assert shown in redact(url)
    assert not any(secret in redact(url) for secret in hidden)


def test_a_password_with_an_at_sign_never_appears(tmp_path: Path):
    secret_url = closed_port_url().replace("http://", "http://alice:s3c@ret99@")
    with pytest.raises(InputError) as err:
        model_files("small", cache=tmp_path / "cache", url=secret_url)
    assert "ret99" not in str(err.value) and "s3c" not in str(err.value) and "http://***@127.0.0.1:" in str(err.value)


def test_weights_that_declare_more_than_a_bilm_are_refused_before_any_read(
    published_layout: Path, tmp_path: Path, monkeypatch
):
    """A few KB of HDF5 can declare 75 GiB (gzip chunks never written): refused from
    what the file declares, without reading a dataset."""
    from .robustness.test_model_files import size_bomb, write_declared_only

    served = published_layout / SMALL.folder
    options = json.loads((served / SMALL.file_names()[0]).read_text())
    write_declared_only(served / SMALL.file_names()[1], size_bomb(options))
    assert (served / SMALL.file_names()[1]).stat().st_size < 100_000
    monkeypatch.setattr(h5py.Dataset, "__getitem__", lambda dataset, selection: pytest.fail(f"{dataset.name} read"))
    cache = tmp_path / "cache"
    with serving(published_layout) as url:
        with pytest.raises(SpacyElmoError, match=r"dataset 'CNN_proj/W_proj' has shape \(124, 50000\), but from .*options"):
            model_files("small", cache=cache, url=url)
    assert not cache.exists()


def test_weights_that_read_an_outside_file_are_refused_and_not_cached(published_layout: Path, tmp_path: Path):
    weights = published_layout / SMALL.folder / SMALL.file_names()[1]
    (tmp_path / "secret.bin").write_bytes(bytes(64))
    with h5py.File(weights, "a") as handle:
        shape = handle["char_embed"].shape
        del handle["char_embed"]
        handle.create_dataset("char_embed", shape, "f4", external=[(str(tmp_path / "secret.bin"), 0, 4 * shape[0] * shape[1])])
    cache = tmp_path / "cache"
    with serving(published_layout) as url:
        with pytest.raises(SpacyElmoError, match=r"dataset 'char_embed' keeps its data in an outside file; refused"):
            model_files("small", cache=cache, url=url)
    assert not cache.exists()


def test_the_deadline_stops_a_tls_handshake_that_never_ends(tmp_path: Path, monkeypatch):
    """An https server that accepts and then says nothing: stopped at the deadline."""
    monkeypatch.setattr(download_module, "DEADLINE_S", 0.5)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def accept_and_hold() -> None:
            connection, _ = server.accept()
            time.sleep(60)
            connection.close()

        threading.Thread(target=accept_and_hold, daemon=True).start()
        started = time.monotonic()
        with pytest.raises(InputError, match=r"took longer than 0.5 s \(0 bytes so far\)"):
            model_files("small", cache=tmp_path / "cache", url=f"https://127.0.0.1:{server.getsockname()[1]}")
        assert time.monotonic() - started < 15  # stopped long before the server would have finished
