"""`python -m spacy_elmo COMMAND` (also installed as `spacy-elmo`)."""
import errno
import sys

import typer

from ..errors import SpacyElmoError
from ..output_files import shortened
from ..sigterm import stopping_on_sigterm
# Each command module registers its command on `app`, in the order --help lists them.
from . import embed, inspect, init_config, perplexity, pretrain  # noqa: F401,I001
from .app import app


def main() -> None:
    """Run the CLI; library errors print as one clear line instead of a traceback."""
    try:
        with stopping_on_sigterm():  # kill, a scheduler or torchrun stop a command as Ctrl-C does
            app()
    except SpacyElmoError as err:
        typer.secho(f"✘ {err}", fg=typer.colors.RED, err=True)
        sys.exit(1)
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:  # a path over PATH_MAX, or a name over 255 bytes
            typer.secho(f"✘ {shortened(err.filename or 'A path')}: {err.strerror}", fg=typer.colors.RED, err=True)
            sys.exit(1)
        if err.errno not in _NO_SPACE:
            raise
        # Outputs are written to temporary files and renamed, so the previous ones are intact.
        typer.secho(
            f"✘ {err.filename or 'Writing an output'}: {err.strerror}; free some space or write elsewhere "
            f"(no earlier output was changed)", fg=typer.colors.RED, err=True,
        )
        sys.exit(1)


_NO_SPACE = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
