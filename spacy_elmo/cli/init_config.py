"""`init-config`: write a commented default pretraining config."""
from pathlib import Path

import typer
from wasabi import msg

from .app import app


@app.command("init-config")
def init_config_cli(
    output_file: Path = typer.Argument(..., help="Where to write the config ('-' for stdout)", dir_okay=False),
    size: str = typer.Option("small", "--size", "-s", help="Model size: tiny, compact, small, medium or original"),
    lang: str = typer.Option("en", "--lang", "-l", help="spaCy language of the tokenizer, or 'whitespace'"),
) -> None:
    """Write the default pretraining config, with a comment on every setting."""
    from ..pretraining.config import parse_config
    from ..pretraining.default_config import default_config_text
    from ..pretraining.corpus import TextSplitter
    from ..output_files import atomic_output_path

    text = default_config_text(size=size, lang=lang)
    config = parse_config(text, {"paths.train": "train.txt"}, source="default config")  # stays valid
    TextSplitter(tokenizer=config.corpus.tokenizer)  # a language `pretrain` would refuse, refused now
    if str(output_file) == "-":
        print(text, end="")
        return
    with atomic_output_path(output_file) as tmp:
        tmp.write_text(text, encoding="utf8")
    msg.good(f"Saved the pretraining config to {output_file}; train with:")
    # On a line of its own and unwrapped, so it can be pasted.
    typer.echo(f"python -m spacy_elmo pretrain {output_file} OUTPUT_DIR --paths.train TEXT --paths.dev HELD_OUT")
