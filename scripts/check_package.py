"""Build the wheel of a `spacy package` directory, install it into a fresh venv, load it.

1. `pip wheel --no-deps --no-build-isolation PACKAGE_DIR` -> `<wheel_dir>/<name>-<version>-py3-none-any.whl`
   (works offline: setuptools >= 70.1 builds wheels without the `wheel` or `build` packages);
2. `python -m venv --system-site-packages --without-pip` in a new temporary
   directory, so torch, spaCy and spacy-elmo come from this environment and nothing
   is downloaded;
3. `pip --python VENV install --no-index WHEEL` (pip checks the wheel's requirements,
   e.g. `spacy-elmo>=x.y`, against what the venv sees);
4. in that venv, from an empty working directory (so nothing in the project is
   reachable): `spacy.load(name)`, run it on a text and check that the pipeline was
   loaded from the venv, that `doc.tensor` has one finite, non-zero row per token and,
   when the pipeline has an `elmo` component, that `doc._.elmo` holds every biLM
   layer for every token. (`doc.tensor` is a shared slot: a `tok2vec` after `elmo`
   overwrites it; the report gives its width.)

Writes a JSON report (`--report`) and exits non-zero with the reason when any step fails.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer
from wasabi import msg

CHECK_TEXT = "The bank raised its rates. We sat on the bank of the river and watched the boats."

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


def build_wheel(package_dir: Path, wheel_dir: Path, package_name: str, version: str) -> Path:
    wheel_dir.mkdir(parents=True, exist_ok=True)
    for old in wheel_dir.glob(f"{package_name}-{version}-*.whl"):
        old.unlink()
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(wheel_dir), str(package_dir)],
        what="Building the wheel",
    )
    wheels = sorted(wheel_dir.glob(f"{package_name}-{version}-*.whl"))
    if not wheels:
        msg.fail(f"No wheel {package_name}-{version}-*.whl appeared in {wheel_dir}", exits=1)
    return wheels[-1]


def check_in_fresh_venv(wheel: Path, package_name: str, workdir: Path) -> Dict[str, Any]:
    venv = workdir / "venv"
    # Without its own pip (and, on Python < 3.12, its own old setuptools, which would
    # shadow the one torch requires): this environment's pip installs into it.
    run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], what="Creating the venv")
    python = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
         "--disable-pip-version-check", str(wheel.resolve())],
        what="Installing the wheel into the venv",
    )
    empty = workdir / "cwd"
    empty.mkdir()
    output = run([str(python), "-c", LOAD_CHECK, package_name, CHECK_TEXT], cwd=empty, what="Loading the package")
    result = json.loads(output.strip().splitlines()[-1])
    result["venv_python"] = str(python)
    problems = []
    if not Path(result["package_file"]).resolve().is_relative_to(venv.resolve()):
        problems.append(f"{package_name} was loaded from {result['package_file']}, not from the venv")
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
    result["problems"] = problems
    return result


def main(
    package_dir: Path = typer.Argument(..., help="Directory written by `spacy package ... --build none`"),
    wheel_dir: Path = typer.Option(Path("packages/dist"), "--wheel-dir", help="Where the wheel goes"),
    report: Path = typer.Option(..., "--report", help="JSON report of the check"),
) -> None:
    meta = read_meta(package_dir)
    package_name = f"{meta['lang']}_{meta['name']}"
    wheel = build_wheel(package_dir, wheel_dir, package_name, meta["version"])
    msg.good(f"Built {wheel}")
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-package-check-") as tmp:
        result = check_in_fresh_venv(wheel, package_name, Path(tmp))
    result.update({"package": package_name, "version": meta["version"], "wheel": str(wheel)})
    report.parent.mkdir(parents=True, exist_ok=True)
    tmp_report = report.with_name(report.name + ".tmp")
    tmp_report.write_text(json.dumps(result, indent=2) + "\n", encoding="utf8")
    tmp_report.replace(report)
    if result["problems"]:
        msg.fail(f"{package_name}: " + "; ".join(result["problems"]), exits=1)
    msg.good(
        f"{package_name} {meta['version']} installs into a fresh venv and loads: pipeline {result['pipeline']}, "
        f"doc.tensor {tuple(result['tensor_shape'])}, doc._.elmo layers {result['elmo_layers_shape']} "
        f"for {result['n_tokens']} tokens"
    )


if __name__ == "__main__":
    typer.run(main)
