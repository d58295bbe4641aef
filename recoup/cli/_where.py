"""Where a read or operation command acts: a database (`--db`, `--schema`, `--tenant`) opened
here, or a remote `recoup serve` (`--url`, `--token`, or RECOUP_URL and RECOUP_TOKEN) reached
through the Python client, whose token chooses the tenant.

The two are exclusive (`--url` with `--db` or `--schema` is bad input, exit 2). A server's
error answer becomes one line, the message of its problem details: exit 2 for a 4xx (the
request was wrong; a 404's line is its detail alone, the words a database's `NotFound` says,
as an unknown id exits 2 from either place), 1 for a 5xx or no answer at all (which says the
URL it could not reach). The token is never printed, in an answer or an error.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from recoup.cli._app import EXIT_USAGE, fail, store_options
from recoup.errors import InvalidInput, NotFound
from recoup.jobs.model import DEFAULT_TENANT

if TYPE_CHECKING:
    from recoup.client import ApiError, Client
    from recoup.storage import Store

DEFAULT_DB = "sqlite:///recoup.db"
# Tries after the first of a request that got no answer or a 5xx: a person waits at the
# terminal (the client's default of 4 waits up to ~8 s), and a POST's tries share one key.
CLI_RETRIES = 2

# `None` defaults, so that a `--db` (or RECOUP_DB) given with `--url` is told apart from none.
DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="RECOUP_DB",
        help=f"Database URL, sqlite:///… or postgresql://… (default: {DEFAULT_DB}).",
        show_default=False,
    ),
]
TenantOption = Annotated[
    str | None,
    typer.Option(
        help="The tenant (default: `default`, the embedded one; with --url, the token's).",
        show_default=False,
    ),
]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="RECOUP_URL",
        help="A remote `recoup serve` (http://host:port): act through its API, not --db.",
        show_default=False,
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="RECOUP_TOKEN",
        help="The API token for --url (or RECOUP_TOKEN); it chooses the tenant.",
        show_default=False,
    ),
]


def _local_only(ctx: typer.Context, value: str | None) -> None:
    if value is not None:
        fail(
            f"`recoup {ctx.command_path.removeprefix('recoup ')}` runs here, on a database: "
            "--url is for the read and operation commands (jobs, schedules, invoices, "
            "customers, report)"
        )


# The commands that only make sense on this machine (migrate, serve, worker, demo, secrets)
# take `--url` only to refuse it in words, rather than as an unknown option.
LocalOnlyUrlOption = Annotated[
    str | None,
    typer.Option("--url", hidden=True, callback=_local_only, show_default=False),
]


@dataclass(frozen=True)
class Where:
    """A database for one tenant (`url` None), or a remote server and its token."""

    db: str = DEFAULT_DB
    schema: str | None = None
    tenant: str | None = None  # as given; None: the embedded one, or the token's
    url: str | None = None
    token: str = field(default="", repr=False)

    @property
    def remote(self) -> bool:
        return self.url is not None


def where(
    *,
    db: str | None,
    schema: str | None,
    tenant: str | None,
    url: str | None,
    token: str | None,
) -> Where:
    """The place the options name, or `InvalidInput` (exit 2) for a mix of both kinds."""
    if url is None:
        if token is not None:
            raise InvalidInput("--token", "…", "expected --url with it (the server it is for)")
        return Where(db=db or DEFAULT_DB, schema=schema, tenant=tenant)
    if db is not None:
        raise InvalidInput("--url", shown_url(url), "expected --url or --db (RECOUP_DB), not both")
    if schema is not None:
        raise InvalidInput("--schema", schema, "a database's option: not with --url")
    if not url.startswith(("http://", "https://")):
        raise InvalidInput("--url", shown_url(url), "expected http://host:port or https://host")
    if not token:
        raise InvalidInput("--token", "", "expected the API token for --url (or RECOUP_TOKEN)")
    return Where(url=url, token=token, tenant=tenant)


@contextlib.contextmanager
def opened_store(place: Where) -> Iterator[tuple[Store, str]]:
    """The store of a local `place` and its tenant, closed afterwards; `NotFound` naming the
    tenant unless it exists (`default`, the embedded tenant, always does)."""
    from recoup.storage import open_store

    tenant = place.tenant or DEFAULT_TENANT
    store = open_store(place.db, **store_options(place.schema, place.db))
    try:
        if tenant != DEFAULT_TENANT and store.get_tenant(tenant) is None:
            raise NotFound(f"no tenant {tenant!r}; `recoup tenants list` shows them")
        yield store, tenant
    finally:
        store.close()


@contextlib.contextmanager
def opened_client(place: Where) -> Iterator[tuple[Client, str]]:
    """A client of a remote `place` and the token's tenant (checked against a `--tenant`
    given), closed afterwards; every error answer inside becomes one line and its exit code."""
    from recoup.client import ApiError, Client, NotFoundError

    assert place.url is not None
    client = Client(place.url, place.token, retries=CLI_RETRIES)
    # httpx logs each request at INFO: where a command runs with logging set up (a worker's
    # process, an embedding program) those lines would join its output and its one-line
    # refusals; the command says itself what happened.
    quiet = _QuietHttpx()
    try:
        try:
            tenant = client.tenant()
        except NotFoundError:  # authenticated, yet no such route: not a server of this kind
            shown = shown_url(place.url)
            fail(f"{shown} answers no GET /v1/tenant: is it a `recoup serve` as recent?")
        if place.tenant is not None and place.tenant != tenant:
            raise InvalidInput("--tenant", place.tenant, f"the token acts for {tenant!r}")
        yield client, tenant
    except ApiError as exc:
        _refused(exc, place)
    finally:
        client.close()
        quiet.restore()


class _QuietHttpx:
    """The loggers of httpx and its transport at WARNING until `restore`."""

    def __init__(self) -> None:
        self.levels = {name: logging.getLogger(name).level for name in ("httpx", "httpcore")}
        for name, level in self.levels.items():
            logging.getLogger(name).setLevel(max(level, logging.WARNING))

    def restore(self) -> None:
        for name, level in self.levels.items():
            logging.getLogger(name).setLevel(level)


def _refused(exc: ApiError, place: Where) -> NoReturn:
    from recoup.client import TransportFailure

    if isinstance(exc, TransportFailure):
        cause = exc.__cause__
        why = str(cause) if cause is not None and str(cause) else type(cause).__name__
        fail(_scrubbed(f"cannot reach {shown_url(place.url or '')} ({why})", place), code=1)
    status = exc.status or 500
    if status == 404:  # an unknown id: the same line a database gives (`NotFound`'s words)
        fail(_scrubbed(exc.detail, place))
    fail(_scrubbed(str(exc), place), code=EXIT_USAGE if status < 500 else 1)


def shown_url(url: str) -> str:
    """`url` for a message: a password in it (`https://user:secret@host`) left out."""
    return re.sub(r"^([a-z]+://[^/@:]*):[^/@]*@", r"\1:…@", url)


def _scrubbed(message: str, place: Where) -> str:
    """One line, and never the token (a server or a proxy could echo it)."""
    text = " ".join(message.split())
    return text.replace(place.token, "…") if place.token else text


__all__ = [
    "DEFAULT_DB",
    "DbOption",
    "LocalOnlyUrlOption",
    "TenantOption",
    "TokenOption",
    "UrlOption",
    "Where",
    "opened_client",
    "opened_store",
    "where",
]
