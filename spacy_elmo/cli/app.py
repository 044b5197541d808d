"""The `spacy-elmo` command group: each command module registers its command on `app`."""
import typer

app = typer.Typer(
    name="spacy-elmo", add_completion=False, no_args_is_help=True,
    help="ELMo for spaCy: embed text, pretrain a biLM and measure its perplexity, inspect pipelines.",
)


@app.callback()
def _commands() -> None:
    """ELMo for spaCy: embed text, pretrain a biLM and measure its perplexity, inspect pipelines."""
