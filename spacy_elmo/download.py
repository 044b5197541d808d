"""Download one file into a cache, once: verified, atomic, with a progress bar.

A download writes to a temporary file beside the destination and renames it only
when every byte the server announced has arrived and the content looks right (JSON
parses, HDF5 has its signature); an interrupted download leaves nothing behind and
simply starts again next time. A file already in place is used without any network.
"""
import http.client
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from .errors import InputError
from .output_files import atomic_output_path, check_output_file, remove_stale_temp_files

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
CHUNK = 1 << 20
TIMEOUT_S = 60


def download(url: str, destination: Path, *, what: str = "file") -> Path:
    """Return `destination`, fetching it from `url` first if it is not there."""
    if destination.is_file():
        return destination
    if not url.startswith(("http://", "https://")):
        raise InputError(f"Cannot download {what} from {url}: the base URL must start with http:// or https://")
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
            f"Could not download {what} from {url} ({reason}). Without internet access, fetch "
            f"that URL on another machine and place the file at {destination} (a model needs both "
            "its *_options.json and *_weights.hdf5 there; the cache folder and the base URL are "
            "set by the loader's cache_dir and base_url, or SPACY_ELMO_CACHE and SPACY_ELMO_BASE_URL)"
        ) from None
    return destination


def _fetch(url: str, target: Path, *, what: str) -> None:
    from tqdm import tqdm

    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        total: Optional[int] = None
        if response.headers.get("Content-Length") is not None:
            total = int(response.headers["Content-Length"])
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
    if total is not None and received != total:
        raise InputError(f"Incomplete download of {url}: {received:,} of {total:,} bytes; run again to retry")


def _verify(path: Path, url: str) -> None:
    """A truncated or wrong file (an HTML error page, say) is refused before it is cached."""
    if path.stat().st_size == 0:
        raise InputError(f"{url} sent an empty file")
    if url.endswith(".json"):
        try:
            json.loads(path.read_text(encoding="utf8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise InputError(f"{url} is not a JSON file ({err})") from None
    elif url.endswith((".hdf5", ".h5")):
        with path.open("rb") as handle:
            if handle.read(len(HDF5_SIGNATURE)) != HDF5_SIGNATURE:
                raise InputError(f"{url} is not an HDF5 file")

