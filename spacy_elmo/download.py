"""Download one file into a cache, once: verified, atomic, with a progress bar.

A download writes to a temporary file beside the destination and renames it only
when every byte the server announced has arrived and the content is what it claims
(JSON that parses, an HDF5 file whose every dataset reads); an interrupted download
leaves nothing behind and simply starts again next time. A file already in place is
used without any network. Redirects are followed only to http(s), a file may not
exceed `MAX_BYTES` nor take longer than `DEADLINE_S`, and credentials in a URL never
appear in a message.
"""
import http.client
import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from .errors import InputError, one_line
from .output_files import atomic_output_path, check_output_file, remove_stale_temp_files

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
CHUNK = 1 << 20
TIMEOUT_S = 60  # without a byte
DEADLINE_S = 3600  # for a whole file
# The largest published file (original-5.5b's weights) is about 375 MB; options are a few KB.
MAX_BYTES = {".json": 1 << 20, ".hdf5": 2 << 30, ".h5": 2 << 30}


def download(url: str, destination: Path, *, what: str = "file") -> Path:
    """Return `destination`, fetching it from `url` first if it is not there."""
    if destination.is_file():
        return destination
    if not url.startswith(("http://", "https://")):
        raise InputError(
            f"Cannot download {what} from {redact(url)}: the base URL must start with http:// or https://"
        )
    check_output_file(destination, what="The model cache file")  # a writable cache, before any network
    remove_stale_temp_files(destination.parent, [destination.name])
    try:
        with atomic_output_path(destination) as tmp:
            _fetch(url, tmp, what=what)
            _verify(tmp, url)
    except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
        if isinstance(err, urllib.error.HTTPError):
            reason = f"HTTP {err.code} {err.reason}"
        else:
            reason = getattr(err, "reason", None) or err
        raise InputError(
            f"Could not download {what} from {redact(url)} ({redact(one_line(reason))}). "
            f"Without internet access, fetch "
            f"that URL on another machine and place the file at {destination} (a model needs both "
            "its *_options.json and *_weights.hdf5 there; the cache folder and the base URL are "
            "set by the loader's cache_dir and base_url, or SPACY_ELMO_CACHE and SPACY_ELMO_BASE_URL)"
        ) from None
    return destination


def redact(text: str) -> str:
    """`text` with the ``user:password@`` of any URL in it replaced by ``***@``."""
    return re.sub(r"(?<=://)[^/@\s]+@", "***@", text)


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to http(s): never to ftp://, file:// or another scheme."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if not newurl.lower().startswith(("http://", "https://")):
            raise InputError(f"{redact(req.full_url)} redirects to {redact(newurl)}, which is not http(s); refused")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _fetch(url: str, target: Path, *, what: str) -> None:
    from tqdm import tqdm

    limit = MAX_BYTES.get(Path(url).suffix, 2 << 30)
    opener = urllib.request.build_opener(_HttpOnlyRedirects)
    deadline = time.monotonic() + DEADLINE_S
    with opener.open(url, timeout=TIMEOUT_S) as response:
        total = _content_length(response.headers.get("Content-Length"), url)
        if total is not None and total > limit:
            raise InputError(f"{redact(url)} announces {total:,} bytes, more than the {limit:,} a model file may have")
        with target.open("wb") as out, tqdm(
            total=total, unit="B", unit_scale=True, desc=f"Downloading {what}: {Path(url).name}",
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
                if time.monotonic() > deadline:
                    raise InputError(
                        f"{redact(url)} took longer than {DEADLINE_S} s ({received:,} bytes so far); stopped, run again to retry"
                    )
    if total is not None and received != total:
        raise InputError(f"Incomplete download of {redact(url)}: {received:,} of {total:,} bytes; run again to retry")


def _content_length(value: Optional[str], url: str) -> Optional[int]:
    if value is None:
        return None
    if not value.strip().isdigit():
        raise InputError(f"{redact(url)} sent an invalid Content-Length ({value!r}); the server is broken")
    return int(value)


def _verify(path: Path, url: str) -> None:
    """A truncated or wrong file (an HTML error page, say) is refused before it is cached:
    options must be a JSON object, weights an HDF5 file whose every dataset reads."""
    shown = redact(url)
    if path.stat().st_size == 0:
        raise InputError(f"{shown} sent an empty file")
    if url.endswith(".json"):
        try:
            content = json.loads(path.read_text(encoding="utf8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise InputError(f"{shown} is not a JSON file ({err})") from None
        if not isinstance(content, dict) or not content:
            raise InputError(f"{shown} is not a biLM options file (a JSON object with the model's settings)")
    elif url.endswith((".hdf5", ".h5")):
        with path.open("rb") as handle:
            if handle.read(len(HDF5_SIGNATURE)) != HDF5_SIGNATURE:
                raise InputError(f"{shown} is not an HDF5 file")
        _read_every_dataset(path, shown)


def _read_every_dataset(path: Path, shown: str) -> None:
    import h5py

    try:
        with h5py.File(path, "r") as handle:
            names: list = []
            handle.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
            if not names:
                raise InputError(f"{shown} is an HDF5 file without datasets, not biLM weights")
            for name in names:
                handle[name][...]
    except (OSError, RuntimeError, ValueError) as err:
        raise InputError(f"{shown} is a damaged HDF5 file ({one_line(err)})") from None

