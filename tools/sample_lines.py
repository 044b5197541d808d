"""Take every N-th line of a text file (a raw-text sample spread over the whole file).

This is how the embedded Portuguese raw-text sample in `assets/` was made from the full
text (the `make-sample` command in project.yml).
"""
from pathlib import Path

import typer


def main(
    input_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="UTF-8 text, one paragraph per line"),
    output_path: Path = typer.Argument(..., help="Where the sampled lines go"),
    every: int = typer.Option(..., "--every", min=1, help="Keep lines N, 2N, 3N, ... (1-based)"),
) -> None:
    with input_path.open(encoding="utf8") as lines:
        kept = [line for number, line in enumerate(lines, start=1) if number % every == 0]
    output_path.parent.mkdir(parents=True, exist_ok=True)
    output_path.write_text("".join(kept), encoding="utf8")
    print(f"{output_path}: {len(kept):,} lines, {sum(len(line.split()) for line in kept):,} words")


if __name__ == "__main__":
    typer.run(main)
