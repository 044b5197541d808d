"""Download one file into a cache, once: verified, atomic, with a progress bar.

A download goes to a temporary file beside the destination, renamed only once every announced byte has arrived and
the caller's check accepts it: an interrupted download leaves nothing behind. A file in place needs no network.
"""
import contextlib
import http.client
import re
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Any, Callable, List, Optional

from .errors import InputError, SpacyElmoError, one_line
from .output_files import atomic_output_path, check_output_file, remove_stale_temp_files

Verifier = Callable[[Path, str], None]

CHUNK = 1 << 20
TIMEOUT_S = 60  # without a byte
DEADLINE_S = 3600  # for a whole file
# The largest published file (original-5.5b's weights) is about 375 MB; options are a few KB.
MAX_BYTES = {".json": 1 << 20, ".hdf5": 2 << 30, ".h5": 2 << 30, ".zip": 2 << 30}


class DownloadFailed(InputError):
    """The server could not be reached or refused the file (the caller says what to do offline)."""


def download(url: str, destination: Path, *, verify: Verifier, what: str = "file") -> Path:
    """Return `destination`, fetching it from `url` first if it is not there; what
    arrives is cached only once `verify(file, url as errors show it)` accepts it."""
    if destination.is_file():
        return destination
    _check_url(url, what)
    check_output_file(destination, what="The model cache file")  # a writable cache, before any network
    remove_stale_temp_files(destination.parent, [destination.name])
    try:
        with atomic_output_path(destination) as tmp:
            _fetch(url, tmp, what=what)
            verify(tmp, redact(url))
    except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
        if isinstance(err, urllib.error.HTTPError):
            reason = f"HTTP {err.code} {err.reason}"
        else:
            reason = getattr(err, "reason", None) or err
        raise DownloadFailed(f"Could not download {what} from {redact(url)} ({redact(one_line(reason))})") from None
    return destination


def _check_url(url: str, what: str) -> None:
    """Refuse a URL whose host urllib would read otherwise than a person does: a
    password's space, "/", "?", "#" or "@" must be percent-encoded, or part of the
    password becomes the host, the port or the path (and shows in messages)."""
    if not url.startswith(("http://", "https://")):
        raise InputError(
            f"Cannot download {what} from {_masked(url)}: the base URL must start with http:// or https://"
        )
    problem = ""
    if re.search(r"[\x00-\x20\x7f]", url):
        problem = "holds a space or a control character"
    else:
        try:
            parts = urllib.parse.urlsplit(url)
            parts.port  # noqa: B018 (raises on a port that is not a number)
        except ValueError:
            problem = "has an invalid host or port"
        else:
            if not parts.hostname:
                problem = "has no host"
            elif "@" in url[len(parts.scheme) + len("://") + len(parts.netloc):]:
                problem = "holds an '@' after its host"
    if problem:
        raise InputError(
            f"Cannot download {what} from {_masked(url)}: the base URL {problem}; a space, '/', '?', '#' "
            "or '@' in its user name or password must be percent-encoded (%20, %2F, %3F, %23, %40)"
        )


def _masked(url: str) -> str:
    """`url`, well-formed or not, with everything between ``://`` and its last ``@``
    masked, and all after its first ``?`` or ``#`` (wherever a password ends)."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        scheme, rest = "", url
    user_info = "***@" if "@" in rest else ""
    return scheme + separator + user_info + re.sub(r"([?#]).*", r"\1***", rest.rsplit("@", 1)[-1], flags=re.S)


def file_name(url: str) -> str:
    """The file name that ends `url`'s path (its query and fragment left out)."""
    return PurePosixPath(urllib.parse.urlsplit(url).path).name


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
# The user info: all of the authority (which ends at the first /, ? or #) up to its last @.
_USER_INFO = re.compile(r"(?<=://)[^/?#]*@")
# A value in the query or fragment: what follows "name=", or a whole part without "=".
_PARAMETER_VALUE = re.compile(r"(?<=[?&#])([^=&#]*=)?[^&#]*")


def redact(text: str) -> str:
    """`text` with the credentials of every URL in it masked: the user info
    (``http://***@host/``, however many ``@`` a password holds) and every value in the
    query and fragment (``?token=***&v=***``). All values, not those of names that look
    secret: a signature, key or token can go by any name, and no message needs one."""
    return _URL.sub(_redact_url, text)


def _redact_url(match: "re.Match[str]") -> str:
    url = _USER_INFO.sub("***@", match.group(0), count=1)
    return _PARAMETER_VALUE.sub(r"\1***", url)


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to http(s): never to ftp://, file:// or another scheme."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if not newurl.lower().startswith(("http://", "https://")):
            raise InputError(f"{redact(req.full_url)} redirects to {redact(newurl)}, which is not http(s); refused")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Deadline:
    """Ends a download at a fixed time, whatever the server sends or withholds.

    A socket timeout only bounds the silence between two bytes (one byte a minute keeps a download alive for ever),
    so a timer shuts down every connection the download opened when the time is up, ending any read blocked on one.
    """

    def __init__(self, seconds: float) -> None:
        self.passed = False
        self._sockets: List[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def opener(self) -> urllib.request.OpenerDirector:
        """An opener whose connections this deadline ends (and that redirects only to http(s))."""
        return urllib.request.build_opener(_HttpOnlyRedirects, _WatchedHandler(self))

    def watch(self, sock: socket.socket) -> None:
        """Shut `sock`'s connection down when the time is up. A duplicate is kept (and
        closed at the end): it stays valid when TLS takes the socket over."""
        with self._lock:
            self._sockets.append(sock.dup())
            if self.passed:
                self._shut_down()

    def _expire(self) -> None:
        with self._lock:
            self.passed = True
            self._shut_down()

    def _shut_down(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> "_Deadline":
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()
        with self._lock:
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()


class _WatchedConnection(http.client.HTTPConnection):
    """An HTTP connection whose socket its deadline watches from the moment it connects."""

    deadline: _Deadline  # set by the handler that makes the connection

    def connect(self) -> None:
        super().connect()
        self.deadline.watch(self.sock)


class _WatchedHTTPSConnection(http.client.HTTPSConnection, _WatchedConnection):
    """The same for HTTPS: HTTPSConnection.connect calls the watched connect above (the
    next class in this one's order) before the TLS handshake, so a server slow to shake
    hands is stopped too."""


class _WatchedHandler(urllib.request.HTTPHandler, urllib.request.HTTPSHandler):
    """Opens http and https connections that `deadline` watches."""

    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._watched(_WatchedConnection), req)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._watched(_WatchedHTTPSConnection), req, context=self._context)

    def _watched(self, kind: type) -> Callable[..., http.client.HTTPConnection]:
        """A maker of `kind` connections (as `do_open` calls it) that set their deadline."""

        def connection(*args: Any, **kwargs: Any) -> http.client.HTTPConnection:
            made = kind(*args, **kwargs)
            made.deadline = self.deadline
            return made

        return connection


def _fetch(url: str, target: Path, *, what: str) -> None:
    """Write what `url` sends into `target`, within `DEADLINE_S` seconds."""
    with _Deadline(DEADLINE_S) as deadline:
        try:
            _receive(deadline.opener(), url, target, what=what)
        except (OSError, http.client.HTTPException, SpacyElmoError):
            if not deadline.passed:
                raise
        if deadline.passed:  # the connection was shut down: a read failed, or seemed to end the body
            received = target.stat().st_size if target.exists() else 0
            raise InputError(
                f"{redact(url)} took longer than {DEADLINE_S} s ({received:,} bytes so far); "
                "stopped, run again to retry"
            )


def _receive(opener: urllib.request.OpenerDirector, url: str, target: Path, *, what: str) -> None:
    """Stream `url` into `target`: all the bytes it announces, and no more than `MAX_BYTES`."""
    from tqdm import tqdm

    name = file_name(url)
    limit = MAX_BYTES.get(PurePosixPath(name).suffix, 2 << 30)
    with opener.open(url, timeout=TIMEOUT_S) as response:
        total = _content_length(response.headers.get("Content-Length"), url)
        if total is not None and total > limit:
            raise InputError(f"{redact(url)} announces {total:,} bytes, more than the {limit:,} a model file may have")
        with target.open("wb") as out, tqdm(
            total=total, unit="B", unit_scale=True, desc=f"Downloading {what}: {name}",
            leave=False, disable=None,
        ) as bar:
            received = 0
            while True:
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                received += len(chunk)
                bar.update(len(chunk))
                if received > limit:
                    raise InputError(f"{redact(url)} sent more than {limit:,} bytes, more than a model file may have; stopped")
    if total is not None and received != total:
        raise InputError(f"Incomplete download of {redact(url)}: {received:,} of {total:,} bytes; run again to retry")


def _content_length(value: Optional[str], url: str) -> Optional[int]:
    if value is None:
        return None
    if not value.strip().isdigit():
        raise InputError(f"{redact(url)} sent an invalid Content-Length ({value!r}); the server is broken")
    return int(value)
