"""`recoup tenants …` and `recoup tokens …`: who may call the HTTP API.

Contract:

    recoup tenants create NAME [--db URL] [--schema S] [--json]
        → {"tenant": NAME, "token": "rcp_…", "signing_secret": "whsec_…"}
    recoup tenants list [--db URL] [--json]
        → [{"id", "name", "created_at", "active_tokens", "token_prefixes", "disabled_at",
            "signing_secret_prefix", "rotating_until"}]
    recoup tenants disable|enable|delete|rotate-secret …   (see `recoup.cli.tenant_lifecycle`)
    recoup tenants configure …   (see `recoup.cli.tenant_settings`)
    recoup tokens create TENANT [--label TEXT] [--json]
        → {"tenant", "token", "id", "prefix"}
    recoup tokens list [--tenant T] [--json]
        → [{"id", "tenant", "prefix", "label", "created_at", "revoked_at"}]
    recoup tokens revoke TOKEN_ID [--json]
        → {"id", "tenant", "prefix", "label", "created_at", "revoked_at"}

A token's secret is printed once, when it is created; only its hash is stored. The signing
secret signs the tenant's outbound requests (Standard Webhooks): give it to the receivers. It
is printed when it is made (`tenants create`, `tenants rotate-secret`) and never again:
listings show the first characters of tokens and secrets only. A Stripe endpoint secret is
never printed (`-` reads it from stdin, out of the shell's history), nor is a Stripe API key
(read from a file, or stdin); both are stored sealed (`recoup.sealed`).
A tenant name is its id: 1–63 lower-case letters, digits, `-`, `_` or `.`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from recoup.cli._app import (
    DbOption,
    JsonOption,
    SchemaOption,
    app,
    print_json,
    store_options,
)
from recoup.errors import Conflict, InvalidInput, NotFound
from recoup.jobs.model import DEFAULT_TENANT
from recoup.tenancy import TokenInfo, issue_token, new_tenant
from recoup.timekeeping.clock import SystemClock
from recoup.timekeeping.instants import format_utc

if TYPE_CHECKING:
    from recoup.storage import ApiTables, Store

TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")

tenants_app = typer.Typer(
    help="Tenants of the HTTP API: create (with a first token), list, configure, disable, "
    "enable, delete, rotate-secret.",
    no_args_is_help=True,
)
tokens_app = typer.Typer(
    help="API tokens of a tenant: create, list, revoke.",
    no_args_is_help=True,
)
app.add_typer(tenants_app, name="tenants")
app.add_typer(tokens_app, name="tokens")


@contextlib.contextmanager
def _opened(db: str, schema: str | None) -> Iterator[tuple[Store, ApiTables]]:
    from recoup.storage import open_api_tables, open_store

    store = open_store(db, **store_options(schema, db))
    try:
        yield store, open_api_tables(store)
    finally:
        store.close()


def _token_json(info: TokenInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "tenant": info.tenant,
        "prefix": info.prefix,
        "label": info.label,
        "created_at": format_utc(info.created_at),
        "revoked_at": None if info.revoked_at is None else format_utc(info.revoked_at),
    }


@tenants_app.command("create")
def create_tenant(
    name: Annotated[str, typer.Argument(help="The tenant's name, which is also its id.")],
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Create a tenant with a signing secret and a first API token."""
    if not TENANT_NAME.fullmatch(name):
        raise InvalidInput(
            "NAME", name, "expected 1–63 lower-case letters, digits, '-', '_' or '.'"
        )
    if name == DEFAULT_TENANT:
        raise InvalidInput(
            "NAME",
            name,
            f"{DEFAULT_TENANT!r} is the embedded tenant of the Python API (made on first use); "
            f"choose another name, or `recoup tokens create {DEFAULT_TENANT}` for a token",
        )
    now = SystemClock().now()
    with _opened(db, schema) as (store, tables):
        if store.get_tenant(name) is not None:
            raise Conflict(
                f"tenant {name!r} exists; `recoup tokens create {name}` issues another token"
            )
        tenant = store.ensure_tenant(new_tenant(name, now=now))
        issued = issue_token(tables, tenant.id, now=now, label="first token")
    if json:
        print_json(
            {"tenant": tenant.id, "token": issued.secret, "signing_secret": tenant.signing_secret}
        )
        return
    typer.echo(f"tenant:         {tenant.id}")
    typer.echo(f"token:          {issued.secret}   (shown once; only its hash is stored)")
    typer.echo(f"signing secret: {tenant.signing_secret}")


@tenants_app.command("list")
def list_tenants(
    db: DbOption = "sqlite:///recoup.db", schema: SchemaOption = None, json: JsonOption = False
) -> None:
    """Every tenant: its state, the prefixes of its active tokens and of its signing secret
    (never the secrets)."""
    with _opened(db, schema) as (store, tables):
        tenants = store.list_tenants()
        prefixes: dict[str, list[str]] = {}
        for token in tables.list_tokens():
            if token.active:
                prefixes.setdefault(token.tenant, []).append(token.prefix)
    rows = [
        {
            "id": t.id,
            "name": t.name,
            "created_at": format_utc(t.created_at),
            "active_tokens": len(prefixes.get(t.id, [])),
            "token_prefixes": prefixes.get(t.id, []),
            "disabled_at": None if t.disabled_at is None else format_utc(t.disabled_at),
            "signing_secret_prefix": t.secret_prefix,
            "rotating_until": None if t.rotating_until is None else format_utc(t.rotating_until),
        }
        for t in tenants
    ]
    if json:
        print_json(rows)
        return
    for row in rows:
        state = f"disabled {row['disabled_at']}" if row["disabled_at"] else "enabled"
        rotating = f" (rotating until {row['rotating_until']})" if row["rotating_until"] else ""
        typer.echo(
            f"{row['id']}\t{row['created_at']}\t{state}\t{row['active_tokens']} active token(s)"
            f"\tsecret {row['signing_secret_prefix']}…{rotating}"
        )


@tokens_app.command("create")
def create_token(
    tenant: Annotated[str, typer.Argument(help="The tenant the token acts for.")],
    label: Annotated[str | None, typer.Option(help="A note to tell tokens apart.")] = None,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Issue another API token for a tenant (`default`, the embedded one, is made on first
    use, here too)."""
    from recoup.jobs.scheduler import Scheduler

    with _opened(db, schema) as (store, tables):
        if tenant == DEFAULT_TENANT:
            Scheduler(store).default_tenant()
        elif store.get_tenant(tenant) is None:
            raise NotFound(f"no tenant {tenant!r}; `recoup tenants create {tenant}` creates it")
        issued = issue_token(tables, tenant, now=SystemClock().now(), label=label)
    if json:
        print_json(
            {
                "tenant": tenant,
                "token": issued.secret,
                "id": issued.info.id,
                "prefix": issued.info.prefix,
            }
        )
        return
    typer.echo(f"token: {issued.secret}   (id {issued.info.id}; shown once)")


@tokens_app.command("list")
def list_tokens(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's tokens.")] = None,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Tokens (never their secrets), oldest first."""
    with _opened(db, schema) as (_, tables):
        rows = [_token_json(t) for t in tables.list_tokens(tenant)]
    if json:
        print_json(rows)
        return
    for row in rows:
        state = f"revoked {row['revoked_at']}" if row["revoked_at"] else "active"
        typer.echo(f"{row['id']}\t{row['tenant']}\t{row['prefix']}…\t{state}\t{row['label'] or ''}")


@tokens_app.command("revoke")
def revoke_token(
    token_id: Annotated[str, typer.Argument(help="The token's id (see `recoup tokens list`).")],
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Revoke a token: requests with it get 401 from now on. Revoking twice is harmless."""
    with _opened(db, schema) as (_, tables):
        info = tables.revoke_token(token_id, now=SystemClock().now())
    if info is None:
        raise NotFound(f"no token {token_id!r}")
    if json:
        print_json(_token_json(info))
        return
    typer.echo(f"revoked {info.id} ({info.prefix}…) of tenant {info.tenant}")
