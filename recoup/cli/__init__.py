"""The `recoup` command. Each sub-module registers its commands on the shared app."""

from __future__ import annotations

import sys

import typer

# Typer ≥ 0.26 vendors click and raises its own copies of click's exceptions, which
# `click.UsageError` does not catch; their public common base is TyperException.
from typer.exceptions import TyperException

from recoup.cli._app import EXIT_USAGE, app
from recoup.errors import InvalidInput, NotFound, RecoupError

# Command modules: importing one registers its commands.
# (one import line per command module, e.g. `from recoup.cli import renewals as _renewals`)
from recoup.cli import plan as _plan  # noqa: F401  # isort: skip
from recoup.cli import replay as _replay  # noqa: F401  # isort: skip
from recoup.cli import renewals as _renewals  # noqa: F401  # isort: skip
from recoup.cli import worker as _worker  # noqa: F401  # isort: skip
from recoup.cli import serve as _serve  # noqa: F401  # isort: skip
from recoup.cli import tenants as _tenants  # noqa: F401  # isort: skip
from recoup.cli import tenant_settings as _tenant_settings  # noqa: F401  # isort: skip
from recoup.cli import tenant_lifecycle as _tenant_lifecycle  # noqa: F401  # isort: skip
from recoup.cli import migrate as _migrate  # noqa: F401  # isort: skip
from recoup.cli import gateway as _gateway  # noqa: F401  # isort: skip
from recoup.cli import demo as _demo  # noqa: F401  # isort: skip
from recoup.cli import anchors as _anchors  # noqa: F401  # isort: skip
from recoup.cli import report as _report  # noqa: F401  # isort: skip
from recoup.cli import merchants as _merchants  # noqa: F401  # isort: skip
from recoup.cli import jobs as _jobs  # noqa: F401  # isort: skip
from recoup.cli import schedules as _schedules  # noqa: F401  # isort: skip
from recoup.cli import listen as _listen  # noqa: F401  # isort: skip
from recoup.cli import invoices as _invoices  # noqa: F401  # isort: skip
from recoup.cli import stripe as _stripe  # noqa: F401  # isort: skip
from recoup.cli import secrets as _secrets  # noqa: F401  # isort: skip
from recoup.cli import emails as _emails  # noqa: F401  # isort: skip
from recoup.cli import customers as _customers  # noqa: F401  # isort: skip


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; usage errors, invalid input and an id that names nothing become one line
    on stderr and exit 2 (the same line and code as a remote server's 404, `cli._where`)."""
    command = typer.main.get_command(app)
    try:
        # RECOUP_<COMMAND>_<OPTION> sets any option (RECOUP_SERVE_PORT=9000); an option's own
        # variable (RECOUP_DB) comes first.
        result = command.main(
            args=argv, prog_name="recoup", standalone_mode=False, auto_envvar_prefix="RECOUP"
        )
    except TyperException as exc:
        # A usage error (bad or missing option), or `recoup` with no arguments, whose help
        # Typer's rich formatter has already printed, leaving the message empty.
        message = exc.format_message().strip()
        if message:
            typer.echo(f"error: {message}", err=True)
        return EXIT_USAGE
    except (InvalidInput, NotFound) as exc:  # an unknown id is bad input too
        typer.echo(f"error: {exc}", err=True)
        return EXIT_USAGE
    except RecoupError as exc:
        typer.echo(f"error: {exc}", err=True)
        return 1
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 130
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
