"""The `spacy-elmo` command group: each command module registers its command on `app`."""
import typer

from ..about import __version__

app = typer.Typer(
    name="spacy-elmo", add_completion=False, no_args_is_help=True,
    help="ELMo for spaCy: embed text, pretrain a biLM and measure its perplexity, inspect pipelines.",
)


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"spacy-elmo {__version__}")
        raise typer.Exit()


@app.callback()
def _commands(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """ELMo for spaCy: embed text, pretrain a biLM and measure its perplexity, inspect pipelines."""
