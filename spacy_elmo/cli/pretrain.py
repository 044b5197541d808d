"""`pretrain`: train a biLM on your own text (one process, or one per GPU under torchrun)."""
from pathlib import Path
from typing import List, Optional

import typer
from spacy.cli._util import parse_config_overrides
from typer.core import TyperCommand

from .app import app
from .device import select_device


class _PretrainCommand(TyperCommand):
    """Reads ``--resume=auto`` as ``--resume auto``: ``--resume`` is a flag (typer has no
    option with an optional value), and its ``auto`` is read among the overrides (`resume_mode`)."""

    def parse_args(self, ctx: typer.Context, args: List[str]) -> List[str]:
        split = [part for arg in args for part in (arg.split("=", 1) if arg.startswith("--resume=") else (arg,))]
        return super().parse_args(ctx, split)


@app.command(
    "pretrain", cls=_PretrainCommand,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def pretrain_cli(
    ctx: typer.Context,
    config_path: Path = typer.Argument(..., help="Pretraining config (see init-config)", dir_okay=False),
    output_dir: Path = typer.Argument(..., help="Directory for the model, vocabulary, metrics and checkpoints"),
    gpu_id: Optional[int] = typer.Option(
        None, "--gpu-id", "-g", help="GPU to use (default: CPU; under torchrun, GPU LOCAL_RANK when available)"
    ),
    resume: bool = typer.Option(
        False, "--resume",
        help="Continue the run in OUTPUT_DIR from its last checkpoint, with its saved settings where CONFIG and "
        "the overrides leave the defaults (its paths included). --resume auto (or --resume=auto): continue it when it "
        "is this run (same settings, --init-from and corpus files), else move it to OUTPUT_DIR.previous and start afresh",
    ),
    init_from: Optional[Path] = typer.Option(
        None, "--init-from",
        help="Continue training this biLM: a directory with options.json and weights.hdf5 (original "
        "format, e.g. a previous run), the weights file itself, or a model name: english-compact (shipped), "
        "small, medium, original, original-5.5b, pubmed, ... (published, downloaded once). Its sizes are kept. The default optimizer (Adagrad at 0.2) becomes Adam at 0.001, which continues it",
    ),
) -> None:
    """Pretrain an ELMo biLM. Override config settings with --section.key value.

    Multi-GPU: torchrun --nproc_per_node=K -m spacy_elmo pretrain CONFIG OUTPUT_DIR
    """
    from ..malloc_settings import keep_freed_memory
    from ..pretraining.config import load_config
    from ..pretraining.resume import resume_mode
    from ..pretraining.run import pretrain
    from ..pretraining.run_directory import RunDirectory

    keep_freed_memory()  # each step's large temporaries reuse the last step's memory
    mode, args = resume_mode(resume, ctx.args)
    resumed = RunDirectory(output_dir).config if mode is True else None  # the settings the run knows
    config = load_config(config_path, parse_config_overrides(args), resumed=resumed)
    device = None if gpu_id is None else select_device(gpu_id)
    pretrain(config, output_dir, device=device, resume=mode, init_from=init_from)
