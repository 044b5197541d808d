"""Build the wheel of a `spacy package` directory, install it into a fresh venv, load it.

1. `pip wheel --no-deps --no-build-isolation PACKAGE_DIR` -> `<wheel_dir>/<name>-<version>-py3-none-any.whl`
   (works offline: setuptools >= 70.1 builds wheels without the `wheel` or `build` packages);
2. `python -m venv --without-pip` in a new temporary directory, isolated from every
   interpreter's packages, plus one `.pth` file that lists this environment's
   site-packages directories as plain paths: torch, spaCy and the other dependencies
   come from this environment and nothing is downloaded. A plain path runs none of
   the `.pth` files in it, so an editable (`pip install -e`) spacy-elmo stays out of
   reach: its wheel is built from a copy of its sources and installed into the venv;
3. `pip --python VENV install --no-index WHEEL` (pip checks the wheel's requirements,
   e.g. `spacy-elmo>=x.y`, against what the venv sees);
4. in that venv, from an empty working directory (so nothing in the project is
   reachable): `spacy.load(name)`, run it on a text and check that the pipeline and
   spacy-elmo were not loaded from the project checkout, that `doc.tensor` has one
   finite, non-zero row per token, when the pipeline has an `elmo` component,
   that `doc._.elmo` holds every biLM layer for every token, and when it has a
   parser, that the paragraph is parsed whole (every token has a head, and the
   report gives the sentences the parser found). (`doc.tensor` is a
   shared slot: a `tok2vec` after `elmo` overwrites it; the report gives its width.)

Writes a JSON report (`--report`) and exits non-zero with the reason when any step fails.
"""
import json
import shutil
import site
import subprocess
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any, Dict, List, Optional
from urllib.parse import unquote, urlparse

import typer
from wasabi import msg

from spacy_elmo.output_files import atomic_output_path

CHECK_TEXT = (
    "The bank raised its rates again. We sat on the bank of the river and watched the boats. "
    "Nobody knew when the rain would stop."
)

# Runs inside the fresh venv; prints one JSON line.
LOAD_CHECK = """
import json, sys
import numpy
import spacy
name, text = sys.argv[1], sys.argv[2]
nlp = spacy.load(name)
doc = nlp(text)
tensor = numpy.asarray(doc.tensor.get() if hasattr(doc.tensor, "get") else doc.tensor)
module = sys.modules[nlp.meta.get("lang", "en") + "_" + nlp.meta["name"]]
print(json.dumps({
    "package_file": module.__file__,
    "pipeline": nlp.pipe_names,
    "n_tokens": len(doc),
    "tensor_shape": list(tensor.shape),
    "tensor_finite": bool(numpy.isfinite(tensor).all()),
    "tensor_zero_rows": int((numpy.abs(tensor).sum(axis=1) == 0).sum()) if tensor.ndim == 2 else -1,
    "elmo_layers_shape": list(doc._.elmo.layers.shape) if doc.has_extension("elmo") and doc._.elmo is not None else None,
    "tags": [token.tag_ for token in doc][:8],
    "deps": [token.dep_ for token in doc][:8],
    "unparsed_tokens": sum(1 for token in doc if not token.dep_) if "parser" in nlp.pipe_names else None,
    "sentences": [sent.text for sent in doc.sents] if doc.has_annotation("SENT_START") else None,
    "spacy_elmo": __import__("spacy_elmo").__file__,
}))
"""


def run(command: List[str], *, cwd: Optional[Path] = None, what: str) -> str:
    """Run a command; on failure print its output and exit with `what` as the reason."""
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()
        msg.fail(f"{what} failed (exit {result.returncode}): {' '.join(map(str, command))}", output[-1500:], exits=1)
    return result.stdout


def read_meta(package_dir: Path) -> Dict[str, Any]:
    meta_path = package_dir / "meta.json"
    if not meta_path.exists():
        msg.fail(f"{package_dir} is not a `spacy package` directory (no meta.json)", exits=1)
    return json.loads(meta_path.read_text(encoding="utf8"))


def build_wheel(source_dir: Path, wheel_dir: Path, pattern: str) -> Path:
    """Build the wheel of `source_dir` into `wheel_dir` (offline) and return it."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    for old in wheel_dir.glob(pattern):
        old.unlink()
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(wheel_dir), str(source_dir)],
        what="Building the wheel",
    )
    wheels = sorted(wheel_dir.glob(pattern))
    if not wheels:
        msg.fail(f"No wheel {pattern} appeared in {wheel_dir}", exits=1)
    return wheels[-1]


def editable_source() -> Optional[Path]:
    """The source directory of spacy-elmo when it is installed editable (`pip install -e`)."""
    try:
        direct_url = distribution("spacy-elmo").read_text("direct_url.json")
    except PackageNotFoundError:
        msg.fail("spacy-elmo is not installed in this environment (pip install -e .)", exits=1)
    info = json.loads(direct_url) if direct_url else {}
    if not info.get("dir_info", {}).get("editable"):
        return None
    return Path(unquote(urlparse(info["url"]).path))


def spacy_elmo_wheel(workdir: Path) -> Optional[Path]:
    """A wheel of an editable spacy-elmo, built from a copy of its sources (so no
    build files land in the checkout); None when it is installed normally."""
    source = editable_source()
    if source is None:
        return None
    copy = workdir / "spacy-elmo-src"
    copy.mkdir()
    shutil.copytree(source / "spacy_elmo", copy / "spacy_elmo", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.cfg", "setup.py", "pyproject.toml", "README.md", "MANIFEST.in"):
        if (source / name).exists():
            shutil.copy2(source / name, copy / name)
    return build_wheel(copy, workdir / "spacy-elmo-dist", "spacy_elmo-*.whl")


def make_venv(venv: Path) -> Path:
    """A venv that sees this environment's packages but not its `.pth` hooks; its python."""
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], what="Creating the venv")
    python = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    purelib = run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], what="Locating the venv"
    ).strip()
    parents = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    lines = [str(Path(p).resolve()) for p in parents if Path(p).is_dir()]
    (Path(purelib) / "_parent_environment.pth").write_text("\n".join(lines) + "\n", encoding="utf8")
    return python


def pip_install(python: Path, *args: str) -> None:
    run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
         "--disable-pip-version-check", *args],
        what="Installing the wheel into the venv",
    )


def check_in_fresh_venv(wheel: Path, package_name: str, workdir: Path, checkout: Path) -> Dict[str, Any]:
    venv = workdir / "venv"
    python = make_venv(venv)
    library = spacy_elmo_wheel(workdir)
    if library is not None:
        pip_install(python, "--no-deps", str(library))
    pip_install(python, str(wheel.resolve()))
    empty = workdir / "cwd"
    empty.mkdir()
    output = run([str(python), "-c", LOAD_CHECK, package_name, CHECK_TEXT], cwd=empty, what="Loading the package")
    result = json.loads(output.strip().splitlines()[-1])
    result["venv_python"] = str(python)
    result["spacy_elmo_wheel"] = library.name if library is not None else None
    problems = []
    if not Path(result["package_file"]).resolve().is_relative_to(venv.resolve()):
        problems.append(f"{package_name} was loaded from {result['package_file']}, not from the venv")
    if Path(result["spacy_elmo"]).resolve().is_relative_to(checkout.resolve()):
        problems.append(f"spacy_elmo was loaded from the project checkout ({result['spacy_elmo']})")
    shape = result["tensor_shape"]
    if len(shape) != 2 or shape[0] != result["n_tokens"] or shape[1] == 0:
        problems.append(f"doc.tensor has shape {shape}, expected ({result['n_tokens']}, width > 0)")
    elif not result["tensor_finite"] or result["tensor_zero_rows"]:
        problems.append(
            f"doc.tensor is not filled: finite={result['tensor_finite']}, all-zero rows={result['tensor_zero_rows']}"
        )
    if "elmo" in result["pipeline"]:
        layers = result["elmo_layers_shape"]
        if not layers or len(layers) != 3 or layers[1] != result["n_tokens"]:
            problems.append(f"doc._.elmo has layers of shape {layers}, expected (n_layers, {result['n_tokens']}, width)")
    if result["unparsed_tokens"]:
        problems.append(f"the parser left {result['unparsed_tokens']} of {result['n_tokens']} tokens without a head")
    result["problems"] = problems
    return result


def main(
    package_dir: Path = typer.Argument(..., help="Directory written by `spacy package ... --build none`"),
    wheel_dir: Path = typer.Option(Path("packages/dist"), "--wheel-dir", help="Where the wheel goes"),
    report: Path = typer.Option(..., "--report", help="JSON report of the check"),
) -> None:
    meta = read_meta(package_dir)
    package_name = f"{meta['lang']}_{meta['name']}"
    wheel = build_wheel(package_dir, wheel_dir, f"{package_name}-{meta['version']}-*.whl")
    msg.good(f"Built {wheel}")
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-package-check-") as tmp:
        result = check_in_fresh_venv(wheel, package_name, Path(tmp), checkout=Path.cwd())
    result.update({"package": package_name, "version": meta["version"], "wheel": str(wheel)})
    with atomic_output_path(report) as tmp_report:
        tmp_report.write_text(json.dumps(result, indent=2) + "\n", encoding="utf8")
    if result["problems"]:
        msg.fail(f"{package_name}: " + "; ".join(result["problems"]), exits=1)
    msg.good(
        f"{package_name} {meta['version']} installs into a fresh venv and loads: pipeline {result['pipeline']}, "
        f"doc.tensor {tuple(result['tensor_shape'])}, doc._.elmo layers {result['elmo_layers_shape']} "
        f"for {result['n_tokens']} tokens" + (f", {len(result['sentences'])} sentences" if result["sentences"] else "")
    )


if __name__ == "__main__":
    typer.run(main)
