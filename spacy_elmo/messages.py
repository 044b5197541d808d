"""One-line messages beside the results: ``⚠`` warnings (stderr) and ``ℹ`` notes (stdout),
never wrapped (wasabi wraps at 80 columns), so a log keeps each whole; a progress bar on
their stream is cleared first and drawn again below them."""
import sys

import click
from tqdm import tqdm


def warn(text: str) -> None:
    with tqdm.external_write_mode(file=sys.stderr):
        click.secho(f"⚠ {text}", fg="yellow", err=True)


def note(text: str) -> None:
    with tqdm.external_write_mode(file=sys.stdout):
        click.secho(f"ℹ {text}", fg="blue")
