"""The shared Typer application and the CLI's error convention."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer

app = typer.Typer(
    name="recoup",
    help="Recoup: durable jobs and failed-payment retries that take effect once.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_USAGE = 2  # bad input: one line on stderr, nothing written


@app.callback()
def _root() -> None:
    """Recoup: durable jobs and failed-payment retries that take effect once."""
    # A callback keeps `recoup` a group of named sub-commands even while only one is
    # registered; without it Typer runs a lone command under the bare program name.


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one line to stderr and exit; never a traceback."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def print_json(value: Any) -> None:
    """Stable JSON on stdout: the same input prints the same bytes."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")
