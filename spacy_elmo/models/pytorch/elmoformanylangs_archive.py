"""ELMoForManyLangs zip archives (the NLPL repository's), unpacked into the model cache.

Only the model's files are unpacked, each bounded first (configs and vocabularies by a fixed size, state dicts by what
they imply); the folder appears by one rename once its model loads, and one process at a time unpacks an archive.
"""
import contextlib
import fcntl
import json
import shutil
import zipfile
import zlib
from pathlib import Path
from typing import Dict, Iterator

from ...errors import SpacyElmoError, WeightsError, one_line
from ...input_files import MAX_VOCABULARY_BYTES
from ...output_files import check_space
from .elmoformanylangs_format import (
    CONFIG_NAME, PUBLISHED_CONFIG_NAMES, STATE_FILES, check_state_size, config_file_name,
    expected_shapes, load, read_skeleton,
)

#: The file names of this format's archives, and what to do with one given as a path (not a published model's name).
SUFFIX = ".zip"
LOCAL_HINT = (
    "unpack it and give the folder that holds its config.json (an ELMoForManyLangs model), or give a published one "
    "by name (elmoformanylangs-LANG) to have it downloaded and unpacked into the model cache"
)
ARCHIVE_FILES = (CONFIG_NAME, "char.dic", "word.dic", *STATE_FILES, *PUBLISHED_CONFIG_NAMES)
#: The most an archive's files may hold once unpacked (the published ones: under 1 GB).
MAX_ARCHIVE_BYTES = 4 << 30
MAX_CONFIG_BYTES = 1 << 20
UNPACKED_NAME = "model"
# The compression methods zipfile reads (the published archives deflate).
READABLE_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)


def archive_members(path: Path, shown: str) -> Dict[str, zipfile.ZipInfo]:
    """The members of an ELMoForManyLangs zip archive that make the model, by file name:
    those of the folder (the top, or one folder down) that holds ``config.json``; each
    readable without a password, and its configs and vocabularies of a bounded size."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = [info for info in archive.infolist() if not info.is_dir()]
            configs = sorted((info for info in infos if Path(info.filename).name == CONFIG_NAME), key=lambda i: (i.filename.count("/"), len(i.filename)))
            if not configs:
                raise WeightsError(f"{shown}: no {CONFIG_NAME} in the archive; not an ELMoForManyLangs model")
            _check_member(configs[0], shown)
            named = _named_config(archive, configs[0], shown)
    except SpacyElmoError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, zlib.error, EOFError) as err:
        raise WeightsError(f"{shown} is not a readable zip archive ({one_line(err)})") from None
    folder = str(Path(configs[0].filename).parent)
    members = {Path(info.filename).name: info for info in infos if str(Path(info.filename).parent) == folder}
    wanted = {name: info for name, info in members.items() if name in (*ARCHIVE_FILES, named)}
    for info in wanted.values():
        _check_member(info, shown)
    declared = sum(info.file_size for info in wanted.values())
    if declared > MAX_ARCHIVE_BYTES:
        raise WeightsError(
            f"{shown}: its model files declare {declared:,} bytes, more than the {MAX_ARCHIVE_BYTES:,} "
            "an ELMoForManyLangs model may have; refused before unpacking"
        )
    return wanted


def _check_member(info: zipfile.ZipInfo, shown: str) -> None:
    """Refuse a member zipfile cannot read, or a config or vocabulary larger than any is."""
    if info.flag_bits & 0x1:
        raise WeightsError(f"{shown}: its {info.filename} is encrypted; not a published ELMoForManyLangs model")
    if info.compress_type not in READABLE_METHODS:
        raise WeightsError(
            f"{shown}: its {info.filename} is compressed with method {info.compress_type}, which spacy-elmo "
            "cannot read (stored, deflate, bzip2 or lzma); not a published ELMoForManyLangs model"
        )
    name = Path(info.filename).name
    if name in STATE_FILES:  # bounded by what the model config implies, once it is read
        return
    bound = MAX_VOCABULARY_BYTES if name.endswith(".dic") else MAX_CONFIG_BYTES
    if info.file_size > bound:
        raise WeightsError(
            f"{shown}: its {info.filename} declares {info.file_size:,} bytes, more than {bound:,}; refused"
        )


def _named_config(archive: zipfile.ZipFile, info: zipfile.ZipInfo, shown: str) -> str:
    """The file name of the model config that the archive's ``config.json`` (`info`) names."""
    try:
        config = json.loads(archive.read(info).decode("utf8"))
    except (ValueError, RecursionError) as err:
        raise WeightsError(f"{shown}: its {CONFIG_NAME} does not read as JSON ({one_line(err)[:200]})") from None
    name = config_file_name(config)
    return name if name.endswith(".json") and name != CONFIG_NAME else CONFIG_NAME


def unpack_archive(path: Path) -> Path:
    """The model folder unpacked from the archive `path`, beside it (once), whole: the
    state dicts' sizes checked against the model config before they are unpacked, and
    the model loaded once before the folder takes its name."""
    folder = path.parent / UNPACKED_NAME
    with _held(path):
        if folder.is_dir():
            return folder
        members = archive_members(path, str(path))
        partial = path.parent / f".{UNPACKED_NAME}.partial"
        shutil.rmtree(partial, ignore_errors=True)  # left by a killed process
        partial.mkdir()
        try:
            check_space(partial, sum(info.file_size for info in members.values()), what="The model cache", name=folder)
            with zipfile.ZipFile(path) as archive:
                _unpack(archive, {n: i for n, i in members.items() if n not in STATE_FILES}, partial)
                shapes = expected_shapes(read_skeleton(partial)[0])
                states = {name: members[name] for name in STATE_FILES if name in members}
                for name, info in states.items():
                    check_state_size(partial / name, info.file_size, shapes[name])
                _unpack(archive, states, partial)
            load(partial)
            partial.rename(folder)
        except SpacyElmoError as err:  # named as the archive's members
            raise type(err)(str(err).replace(str(partial), str(path))) from None
        except (zipfile.BadZipFile, zlib.error, EOFError) as err:
            raise WeightsError(
                f"{path}: the archive does not unpack ({one_line(err)}); delete it to download it again"
            ) from None
        except OSError as err:
            raise WeightsError(
                f"{path}: cannot unpack it into {folder} ({err.strerror or one_line(err)}); the archive is fine: "
                "run again once there is room (or move the cache: SPACY_ELMO_CACHE)"
            ) from None
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return folder


def _unpack(archive: zipfile.ZipFile, members: Dict[str, zipfile.ZipInfo], into: Path) -> None:
    """Write `members` into the folder `into` under their names."""
    for name, info in members.items():
        with archive.open(info) as source, (into / name).open("wb") as target:
            shutil.copyfileobj(source, target, 1 << 20)  # zipfile stops at the declared size, checks the CRC


@contextlib.contextmanager
def _held(path: Path) -> Iterator[None]:
    """Hold `path` (an OS lock on the file itself, dropped with the process): one
    process unpacks it while the others wait."""
    with path.open("rb") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
