"""Split a plain-text corpus (one sentence or paragraph per line) into training and held-out text.

Every `--every`-th non-blank line goes to the held-out file (so held-out text comes
from all over the corpus), up to `--max-heldout` lines; the rest is training text.
Both outputs are written to temp files and renamed, so an interrupted run leaves
no half-written file behind, and a refused one (an output that is the input or the other
output, too little text) leaves both as they were.
"""
from pathlib import Path
from typing import Tuple

import typer
from wasabi import msg

from spacy_elmo.errors import InputError, SpacyElmoError
from spacy_elmo.output_files import atomic_output_path, check_output_file


def split_lines(input_path: Path, train_path: Path, heldout_path: Path, *, every: int, max_heldout: int) -> Tuple[int, int]:
    """Returns (training lines, held-out lines). Too little text for both outputs raises
    :class:`InputError` before either is written."""
    n_train = n_heldout = n_seen = 0
    with atomic_output_path(train_path) as train_tmp, atomic_output_path(heldout_path) as heldout_tmp:
        with input_path.open(encoding="utf8") as lines, train_tmp.open("w", encoding="utf8") as train, \
                heldout_tmp.open("w", encoding="utf8") as heldout:
            for line in lines:
                if not line.strip():
                    continue
                n_seen += 1
                if n_seen % every == 0 and n_heldout < max_heldout:
                    heldout.write(line.rstrip("\n") + "\n")
                    n_heldout += 1
                else:
                    train.write(line.rstrip("\n") + "\n")
                    n_train += 1
        if n_train == 0 or n_heldout == 0:  # before the temporary files replace the outputs
            raise InputError(f"{input_path}: too little text to split ({n_train} training, {n_heldout} held-out lines)")
    return n_train, n_heldout


def main(
    input_path: Path = typer.Argument(..., help="Plain-text corpus, UTF-8"),
    train_path: Path = typer.Argument(..., help="Training text output"),
    heldout_path: Path = typer.Argument(..., help="Held-out text output"),
    every: int = typer.Option(25, "--every", min=2, help="Every N-th line is held out"),
    max_heldout: int = typer.Option(1000, "--max-heldout", min=1, help="At most this many held-out lines"),
) -> None:
    if not input_path.is_file():
        msg.fail(f"Raw text not found: {input_path} (set --vars.raw_text to a UTF-8 text file)", exits=1)
    try:
        check_output_file(train_path, inputs=[input_path])
        check_output_file(heldout_path, inputs=[input_path], others=[train_path])
        n_train, n_heldout = split_lines(input_path, train_path, heldout_path, every=every, max_heldout=max_heldout)
    except SpacyElmoError as err:
        msg.fail(str(err), exits=1)
    except UnicodeDecodeError as err:
        msg.fail(f"{input_path}: not UTF-8 text ({err.reason} at byte {err.start})", exits=1)
    msg.good(f"{train_path}: {n_train} lines; {heldout_path}: {n_heldout} lines")


if __name__ == "__main__":
    typer.run(main)
