"""Check that every input of a workflow exists before it starts; say how to get what is missing.

Usage (the first step of each workflow in project.yml passes the vars that name inputs):
    python scripts/check_inputs.py WORKFLOW [--vars.NAME VALUE ...]

The inputs of a workflow are the `deps` of its commands that no earlier command of the
workflow writes. For each missing one the message names the var(s) that set its path
and, when it is a project asset, where it comes from and how to fetch it
(`spacy project assets`, `--extra` for the full-size data), or why it cannot be
downloaded (then: which var to point at your own copy). Exits 1 if anything is missing.
"""
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from wasabi import msg
from weasel.util import load_project_config, parse_config_overrides

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def normalize(path: str) -> str:
    return Path(path).as_posix().rstrip("/")


def is_within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent + "/")


def workflow_inputs(config: Dict[str, Any], workflow: str) -> List[str]:
    """Deps of the workflow's commands that no earlier command in it outputs, in order."""
    commands = {command["name"]: command for command in config.get("commands", [])}
    produced: List[str] = []
    inputs: List[str] = []
    for name in config["workflows"][workflow]:
        command = commands[name]
        for dep in map(normalize, command.get("deps", [])):
            made_earlier = any(is_within(dep, out) or is_within(out, dep) for out in produced)
            if not made_earlier and dep not in inputs:
                inputs.append(dep)
        produced.extend(normalize(out) for out in command.get("outputs", []) + command.get("outputs_no_cache", []))
    return inputs


def vars_naming(path: str, variables: Dict[str, Any]) -> List[str]:
    """Vars whose value is this path, or a directory it lies in (most specific first)."""
    names = [
        (len(str(value)), name) for name, value in variables.items()
        if isinstance(value, str) and value and is_within(path, normalize(value))
    ]
    return [name for _, name in sorted(names, reverse=True)]


def find_asset(path: str, config: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    for asset in config.get("assets", []):
        if normalize(asset.get("dest", "")) == path:
            return asset
    return None


def explain(path: str, config: Dict[str, Any]) -> str:
    variables = config.get("vars", {})
    names = vars_naming(path, variables)
    asset = find_asset(path, config)
    lines = []
    if asset is not None:
        description = " ".join(asset.get("description", "").split())
        if description:
            lines.append(f"What it is: {description}.")
        extra = " --extra" if asset.get("extra") else ""
        if asset.get("url"):
            lines.append(f"Fetch it: python -m spacy project assets{extra}   (downloads {asset['url']})")
        elif is_within(path, "assets") and not asset.get("extra"):
            lines.append("It ships with the repository: restore it with `git checkout -- assets/`.")
    elif path.startswith("configs/") or path.startswith("scripts/"):
        lines.append("It is part of the repository: restore it with `git checkout -- " + path + "`.")
    if names:
        settings = " or ".join(f"--vars.{name}" for name in names)
        example = ""
        if "data_dir" in names:
            example = " (data_dir: a directory laid out like spacy-elmo's shared data, e.g. ../shared/data)"
        lines.append(f"Or point {settings} at your own copy{example}.")
    return "\n    ".join(lines) if lines else "It should exist before the workflow starts."


def main(argv: List[str]) -> int:
    if not argv or argv[0].startswith("-"):
        msg.fail("Usage: python scripts/check_inputs.py WORKFLOW [--vars.NAME VALUE ...]", exits=2)
    workflow, overrides = argv[0], parse_config_overrides(argv[1:], env_var=None)
    config = load_project_config(PROJECT_ROOT, overrides=overrides)
    if workflow not in config.get("workflows", {}):
        msg.fail(f"No workflow {workflow!r} in project.yml", exits=2)
    inputs = workflow_inputs(config, workflow)
    missing = [path for path in inputs if not (PROJECT_ROOT / path).exists()]
    if not missing:
        msg.good(f"All {len(inputs)} inputs of workflow '{workflow}' are present")
        return 0
    msg.fail(f"Workflow '{workflow}' cannot start: {len(missing)} of its inputs are missing")
    for path in missing:
        print(f"  - {path}\n    {explain(path, config)}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
