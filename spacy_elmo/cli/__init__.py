"""`python -m spacy_elmo COMMAND` (also installed as `spacy-elmo`)."""
import errno
import sys

import typer

from ..errors import SpacyElmoError
from ..stopping import stopping_on_sigterm

app = typer.Typer(
    name="spacy-elmo", add_completion=False, no_args_is_help=True,
    help="ELMo for spaCy: embed text, pretrain a biLM and measure its perplexity, inspect pipelines.",
)


@app.callback()
def _commands() -> None:
    """ELMo for spaCy: embed text, pretrain a biLM and measure its perplexity, inspect pipelines."""


# Each command module registers itself on `app`.
from . import embed  # noqa: E402,F401
from . import inspect  # noqa: E402,F401
from . import init_config, perplexity, pretrain  # noqa: E402,F401


def main() -> None:
    """Run the CLI; library errors print as one clear line instead of a traceback."""
    try:
        with stopping_on_sigterm():  # kill, a scheduler or torchrun stop a command as Ctrl-C does
            app()
    except SpacyElmoError as err:
        typer.secho(f"✘ {err}", fg=typer.colors.RED, err=True)
        sys.exit(1)
    except OSError as err:
        if err.errno not in _NO_SPACE:
            raise
        # Outputs are written to temporary files and renamed, so the previous ones are intact.
        typer.secho(
            f"✘ {err.filename or 'Writing an output'}: {err.strerror}; free some space or write elsewhere "
            f"(no earlier output was changed)", fg=typer.colors.RED, err=True,
        )
        sys.exit(1)


_NO_SPACE = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
