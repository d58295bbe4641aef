"""The `recoup` command. Each sub-module registers its commands on the shared app."""

from __future__ import annotations

import sys

import click
import typer

from recoup.cli._app import EXIT_USAGE, app
from recoup.errors import InvalidInput, RecoupError

# Command modules: importing one registers its commands.
# (one import line per command module, e.g. `from recoup.cli import renewals as _renewals`)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; usage errors and invalid input become one line on stderr and exit 2."""
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="recoup", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
        return EXIT_USAGE
    except click.UsageError as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        return EXIT_USAGE
    except InvalidInput as exc:
        click.echo(f"error: {exc}", err=True)
        return EXIT_USAGE
    except RecoupError as exc:
        click.echo(f"error: {exc}", err=True)
        return 1
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        click.echo("aborted", err=True)
        return 130
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
