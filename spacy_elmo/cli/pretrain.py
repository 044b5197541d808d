"""`pretrain`: train a biLM on your own text (one process, or one per GPU under torchrun)."""
from pathlib import Path
from typing import Optional

import typer
from spacy.cli._util import parse_config_overrides

from .app import app
from .device import select_device


@app.command(
    "pretrain",
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
        help="Continue the run in OUTPUT_DIR from its last checkpoint. --resume auto: continue it when it is "
        "this run (same settings, --init-from and corpus files), else move it to OUTPUT_DIR.previous and start afresh",
    ),
    init_from: Optional[Path] = typer.Option(
        None, "--init-from",
        help="Continue training this biLM: a directory with options.json and weights.hdf5 (original "
        "format, e.g. a previous run), the weights file itself, or a model name: english-compact (shipped), "
        "small, medium, original, original-5.5b, pubmed, ... (published, downloaded once). Its sizes are kept, but a "
        "larger --model.lstm_dim widens its LSTM and a larger --model.projection_dim its projection (the new "
        "parts start silent)",
    ),
) -> None:
    """Pretrain an ELMo biLM. Override config settings with --section.key value.

    Multi-GPU: torchrun --nproc_per_node=K -m spacy_elmo pretrain CONFIG OUTPUT_DIR
    """
    from ..malloc_settings import keep_freed_memory
    from ..pretraining.config import load_config
    from ..pretraining.resume import resume_mode
    from ..pretraining.run import pretrain

    keep_freed_memory()  # each step's large temporaries reuse the last step's memory
    mode, args = resume_mode(resume, ctx.args)
    config = load_config(config_path, parse_config_overrides(args))
    device = None if gpu_id is None else select_device(gpu_id)
    pretrain(config, output_dir, device=device, resume=mode, init_from=init_from)
