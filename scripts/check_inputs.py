"""Check that every input of the workflows exists before one starts; say how to get what is missing.

Usage (the first step of each workflow in project.yml passes the vars that name inputs):
    python scripts/check_inputs.py [--vars.NAME VALUE ...]

The inputs are the `deps` of the workflows' steps that no step writes: the data, the
configs, the scripts, and a biLM in elmo_model that no step trains. A command cannot tell
which workflow runs it, so the inputs of all of them are checked. For each missing one
the message names the var(s) that set its path and, when it is a project asset, where it
comes from and how to fetch it (`spacy project assets`, `--extra` for the full-size data),
or why it cannot be downloaded (then: which var to point at your own copy). Exits 1 if
anything is missing.
"""
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from wasabi import msg
from weasel.util import load_project_config, parse_config_overrides
from weasel.util.environment import ENV_VARS

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def normalize(path: str) -> str:
    return Path(path).as_posix().rstrip("/")


def is_within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent + "/")


def workflow_steps(config: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The commands that some workflow runs, each once, in order."""
    commands = {command["name"]: command for command in config.get("commands", [])}
    names = dict.fromkeys(name for workflow in config.get("workflows", {}).values() for name in workflow)
    return [commands[name] for name in names]


def project_inputs(config: Dict[str, Any]) -> List[str]:
    """Deps of the workflows' steps that no step of a workflow writes, in order."""
    steps = workflow_steps(config)
    produced = [
        normalize(out) for step in steps for out in step.get("outputs", []) + step.get("outputs_no_cache", [])
    ]
    inputs: List[str] = []
    for dep in (normalize(dep) for step in steps for dep in step.get("deps", [])):
        made_by_a_step = any(is_within(dep, out) or is_within(out, dep) for out in produced)
        if not made_by_a_step and dep not in inputs:
            inputs.append(dep)
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


def settings_hint(names: List[str], env_names: Sequence[str]) -> str:
    """How to set these vars: on the command line, or in the overrides variable when it sets them."""
    return " or ".join(
        f"vars.{name} in {ENV_VARS.CONFIG_OVERRIDES} (e.g. a copy of configs/full.vars)" if name in env_names
        else f"--vars.{name}"
        for name in names
    )


def explain(path: str, config: Dict[str, Any], env_names: Sequence[str] = ()) -> str:
    """What the missing file is, how to fetch or restore it, and which var points elsewhere."""
    names = vars_naming(path, config.get("vars", {}))
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
        example = ""
        if "data_dir" in names:
            example = " (data_dir: a directory laid out like spacy-elmo's shared data, e.g. ../shared/data)"
        lines.append(f"Or point {settings_hint(names, env_names)} at your own copy{example}.")
    return "\n    ".join(lines) if lines else "It should exist before the workflow starts."


def main(argv: List[str]) -> int:
    if argv and not argv[0].startswith("--vars."):
        msg.fail("Usage: python scripts/check_inputs.py [--vars.NAME VALUE ...]", exits=2)
    # The values passed are the ones the workflow runs with: weasel interpolated them with
    # the command line's and the environment's overrides.
    overrides = parse_config_overrides(argv, env_var=None)
    config = load_project_config(PROJECT_ROOT, overrides=overrides)
    # weasel's config["vars"] keeps the project.yml value of an overridden var.
    config["vars"] = {**config.get("vars", {}), **{key[len("vars."):]: value for key, value in overrides.items()}}
    env_names = [key[len("vars."):] for key in parse_config_overrides([], env_var=ENV_VARS.CONFIG_OVERRIDES)]
    inputs = project_inputs(config)
    missing = [path for path in inputs if not (PROJECT_ROOT / path).exists()]
    if not missing:
        msg.good(f"All {len(inputs)} inputs of the workflows are present")
        return 0
    msg.fail(f"The workflow cannot start: {len(missing)} of its inputs are missing")
    for path in missing:
        print(f"  - {path}\n    {explain(path, config, env_names)}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
