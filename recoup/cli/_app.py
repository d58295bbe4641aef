"""The shared Typer application, the options every database command spells alike, and the
CLI's error convention."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from recoup.errors import InvalidInput
from recoup.jobs.ssrf import ALLOW_PRIVATE_ENV

if TYPE_CHECKING:
    from recoup.jobs.ssrf import SsrfGuard

app = typer.Typer(
    name="recoup",
    help="Recoup: durable jobs and failed-payment retries that take effect once.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from recoup import __version__

        typer.echo(f"recoup {__version__}")
        raise typer.Exit(0)


# The callback keeps `recoup` a group of named sub-commands (without one Typer runs a lone
# command under the bare program name) and carries the group's own options.
@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version."
        ),
    ] = False,
    wide: Annotated[
        bool,
        typer.Option(
            "--wide",
            envvar="RECOUP_WIDE",
            help="Tables as wide as their contents on a terminal too (piped output always is).",
        ),
    ] = False,
) -> None:
    """Recoup: durable jobs and failed-payment retries that take effect once."""
    from recoup.cli._output import set_wide

    set_wide(wide)


EXIT_USAGE = 2  # bad input: one line on stderr, nothing written
_TRUE = ("1", "true", "yes", "on")  # what an environment flag accepts as "set"

# Options shared by the commands that open a database or run jobs.
DbOption = Annotated[
    str,
    typer.Option("--db", envvar="RECOUP_DB", help="Database URL (sqlite:///… or postgresql://…)."),
]
SchemaOption = Annotated[
    str | None, typer.Option(help="PostgreSQL schema holding Recoup's tables.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
AllowPrivateOption = Annotated[
    bool, typer.Option(help=f"Allow private/loopback targets (or {ALLOW_PRIVATE_ENV}=1).")
]
AllowCidrOption = Annotated[
    list[str] | None, typer.Option(help="Allow targets in this CIDR block (repeatable).")
]
LogLevelOption = Annotated[
    str,
    typer.Option("--log-level", envvar="RECOUP_LOG_LEVEL", help="debug, info, warning or error."),
]
LogFormatOption = Annotated[
    str,
    typer.Option(
        "--log-format",
        envvar="RECOUP_LOG_FORMAT",
        help="text, or json (one object per line with tenant, job id, name, attempt, outcome).",
    ),
]
HandlersOption = Annotated[
    str | None,
    typer.Option(help="Python handlers: module:attribute of a HandlerRegistry (cwd importable)."),
]


def store_options(schema: str | None, db: str | None = None) -> dict[str, Any]:
    """`open_store` keyword arguments for a `--schema` option (None: the backend's default).

    Checked here so the error names `--schema`, the option typed, rather than the store's own
    `schema` parameter; a schema with a SQLite `--db` (given `db`) is refused too."""
    if not schema:
        return {}
    from recoup.storage import SCHEMA_NAME_ALLOWED, is_postgres_url, valid_schema_name

    if db is not None and not is_postgres_url(db):
        raise InvalidInput("--schema", schema, "only PostgreSQL databases have schemas")
    if not valid_schema_name(schema):
        raise InvalidInput("--schema", schema, SCHEMA_NAME_ALLOWED)
    return {"schema": schema}


def ssrf_guard(allow_private_targets: bool, allow_cidr: list[str] | None) -> SsrfGuard:
    """The SSRF guard of `--allow-private-targets` (or its environment variable) and
    `--allow-cidr`."""
    from recoup.jobs.ssrf import SsrfGuard

    allow_private = allow_private_targets or os.environ.get(ALLOW_PRIVATE_ENV, "").lower() in _TRUE
    try:
        return SsrfGuard(allow_private=allow_private, allowed_cidrs=allow_cidr or ())
    except InvalidInput as exc:  # the guard names its parameter; the user typed --allow-cidr
        raise InvalidInput("--allow-cidr", exc.value, exc.allowed) from None


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one line to stderr and exit; never a traceback."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def print_json(value: Any) -> None:
    """Stable JSON on stdout: the same input prints the same bytes."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")
