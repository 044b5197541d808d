"""`perplexity`: how well a pretraining run's biLM predicts held-out text."""
from pathlib import Path
from typing import List, Optional

import typer
from wasabi import msg

from .app import app
from .device import select_device


@app.command("perplexity")
def perplexity_cli(
    run_dir: Path = typer.Argument(
        ..., help="A pretraining run's output directory (model, softmax, vocab, config), or a model shipped with its softmax: english-compact, portuguese-compact",
        file_okay=False,
    ),
    texts: List[Path] = typer.Argument(..., help="Held-out text: files, directories or glob patterns, read as the run read its training text"),
    max_sentences: Optional[int] = typer.Option(None, "--max-sentences", min=1, help="Score at most this many sentences"),
    unigram: bool = typer.Option(False, "--unigram", help="Also the unigram baseline of the run's training text"),
    gpu_id: Optional[int] = typer.Option(None, "--gpu-id", "-g", help="GPU to use (default: CPU)"),
) -> None:
    """Forward, backward and average perplexity (full softmax) of a run's biLM on TEXTS."""
    from ..pretraining.evaluation import run_perplexity

    result = run_perplexity(
        run_dir, texts, max_sentences=max_sentences, unigram=unigram, device=select_device(gpu_id)
    )
    line = (
        f"{result['sentences']:,} sentences, {result['dev_tokens']:,} predictions: perplexity "
        f"{result['dev_perplexity']:.2f} (forward {result['dev_perplexity_forward']:.2f}, "
        f"backward {result['dev_perplexity_backward']:.2f})"
    )
    if "unigram_perplexity" in result:
        line += f"; unigram baseline {result['unigram_perplexity']:.1f}"
    msg.good(line)
