"""The `recoup` command. Each sub-module registers its commands on the shared app."""

from __future__ import annotations

import importlib
import sys
from typing import Final

import typer

# Typer ≥ 0.26 vendors click and raises its own copies of click's exceptions, which
# `click.UsageError` does not catch; their public common base is TyperException.
from typer.exceptions import TyperException

from recoup.cli._app import EXIT_USAGE, app
from recoup.errors import InvalidInput, NotFound, RecoupError

# Each top-level command → the modules that register it (importing one registers its
# commands). `main` imports only the named command's modules, so `recoup worker` never loads
# the API's schemas or the demo; help, no command and an unknown name load them all, in this
# order. tests/cli/test_cli_main.py holds the map to what the modules register.
COMMAND_MODULES: Final[dict[str, tuple[str, ...]]] = {
    "plan": ("plan",),
    "replay": ("replay",),
    "renewals": ("renewals",),
    "worker": ("worker",),
    "serve": ("serve",),
    "tenants": ("tenants", "tenant_settings", "tenant_lifecycle"),
    "tokens": ("tenants",),
    "migrate": ("migrate",),
    "gateway": ("gateway",),
    "demo": ("demo",),
    "anchors": ("anchors",),
    "report": ("report",),
    "merchants": ("merchants",),
    "jobs": ("jobs",),
    "schedules": ("schedules",),
    "listen": ("listen",),
    "invoices": ("invoices",),
    "stripe": ("stripe",),
    "secrets": ("secrets",),
    "emails": ("emails",),
    "customers": ("customers",),
}


def load_commands(name: str | None = None) -> typer.Typer:
    """The application with the commands `name` needs registered (every command when `name`
    is None or names none)."""
    modules = COMMAND_MODULES.get(name or "") or tuple(
        dict.fromkeys(m for ms in COMMAND_MODULES.values() for m in ms)
    )
    for module in modules:
        importlib.import_module(f"recoup.cli.{module}")
    return app


def _command_name(args: list[str]) -> str | None:
    """The sub-command `args` names: its first word that is not an option (the group's own
    options take no value); None where `--help` comes first, which lists every command."""
    for arg in args:
        if arg == "--help":
            return None
        if not arg.startswith("-"):
            return arg
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; usage errors, invalid input and an id that names nothing become one line
    on stderr and exit 2 (the same line and code as a remote server's 404, `cli._where`)."""
    args = sys.argv[1:] if argv is None else argv
    command = typer.main.get_command(load_commands(_command_name(args)))
    try:
        # RECOUP_<COMMAND>_<OPTION> sets any option (RECOUP_SERVE_PORT=9000); an option's own
        # variable (RECOUP_DB) comes first.
        result = command.main(
            args=args, prog_name="recoup", standalone_mode=False, auto_envvar_prefix="RECOUP"
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
