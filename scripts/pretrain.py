"""Run `python -m spacy_elmo pretrain` so that rerunning the workflow resumes an interrupted run.

`spacy project run` reruns a step whose previous run did not finish. The pretraining
command itself refuses to start over a directory that holds a checkpoint unless it
gets `--resume`, and `--resume` needs that checkpoint to belong to the same run. This
wrapper records what a run was started with (config file contents, arguments and the
contents of the corpus files) in `OUTPUT_DIR/project_run.json`, then:

- checkpoint present and same run -> adds `--resume` (continues from the last checkpoint);
- checkpoint present but the config, arguments or corpus changed -> moves the old
  directory to `OUTPUT_DIR.previous` (or `.previous.2`, ...: nothing is deleted) and starts afresh;
- no checkpoint -> starts afresh.

While another pretraining run holds OUTPUT_DIR, nothing is moved or written: one line
names the other process.

Usage: python scripts/pretrain.py CONFIG OUTPUT_DIR [any `spacy_elmo pretrain` options]
"""
import glob
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import List

from wasabi import msg

from spacy_elmo.directory_lock import hold_directory
from spacy_elmo.errors import SpacyElmoError
from spacy_elmo.output_files import atomic_output_path

CHECKPOINT_NAME = "checkpoint.pt"  # spacy_elmo.pretraining.checkpoint.CHECKPOINT_NAME
RUN_RECORD_NAME = "project_run.json"
CORPUS_OPTIONS = ("--paths.train", "--paths.dev")


def file_digest(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def corpus_files(value: str) -> List[Path]:
    """The files a corpus setting names: a file, or a glob pattern's matches."""
    if glob.has_magic(value):
        return [Path(name) for name in sorted(glob.glob(value)) if Path(name).is_file()]
    return [Path(value)] if Path(value).is_file() else []


def run_signature(config_path: Path, args: List[str]) -> str:
    """Identifies a run: config text, arguments and the corpus files' contents."""
    parts = {"config": config_path.read_text(encoding="utf8"), "args": args, "corpus": {}}
    for option, value in zip(args, args[1:]):
        if option in CORPUS_OPTIONS:
            for path in corpus_files(value):
                parts["corpus"][str(path)] = file_digest(path)
    return hashlib.md5(json.dumps(parts, sort_keys=True).encode("utf8")).hexdigest()


def main(argv: List[str]) -> int:
    if len(argv) < 2 or argv[0].startswith("-") or argv[1].startswith("-"):
        msg.fail("Usage: python scripts/pretrain.py CONFIG OUTPUT_DIR [pretrain options]", exits=2)
    config_path, output_dir, args = Path(argv[0]), Path(argv[1]), [a for a in argv[2:] if a != "--resume"]
    if not config_path.is_file():
        msg.fail(f"Pretraining config not found: {config_path} (set --vars.pretrain_config)", exits=1)
    for option, value in zip(args, args[1:]):
        if option in CORPUS_OPTIONS and not (Path(value).exists() or corpus_files(value)):
            msg.fail(f"{option}: {value} does not exist (run the convert step first, or fix the var)", exits=1)
    try:
        with hold_directory(output_dir, what="pretraining run"):  # released for the command, which holds it again
            resume = _prepare(config_path, output_dir, args)
    except SpacyElmoError as err:
        print(f"✘ {err}", file=sys.stderr)  # one unwrapped line
        return 1
    command = [sys.executable, "-m", "spacy_elmo", "pretrain", str(config_path), str(output_dir), *args]
    if resume:
        command.append("--resume")
    print("Running command:", " ".join(command), flush=True)
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        msg.warn("Interrupted: run the workflow again to resume from the last checkpoint")
        return 130


def _prepare(config_path: Path, output_dir: Path, args: List[str]) -> bool:
    """Move a different run aside and record this one; True when it resumes."""
    signature = run_signature(config_path, args)
    record_path = output_dir / RUN_RECORD_NAME
    resume = False
    if (output_dir / CHECKPOINT_NAME).exists():
        recorded = json.loads(record_path.read_text(encoding="utf8")) if record_path.exists() else {}
        if recorded.get("signature") == signature:
            resume = True
            msg.info(f"Resuming the pretraining run in {output_dir} from its last checkpoint")
        else:
            previous = _free_name(output_dir.with_name(output_dir.name + ".previous"))
            output_dir.rename(previous)  # an older .previous is kept: nothing is deleted
            msg.warn(f"The config, options or corpus changed: moved the old run to {previous}, starting afresh")
    output_dir.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(record_path) as tmp:
        tmp.write_text(json.dumps({"signature": signature, "config": str(config_path), "args": args}, indent=2) + "\n")
    return resume


def _free_name(path: Path) -> Path:
    """`path`, or `path.2`, `path.3`, ... : the first that does not exist."""
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
