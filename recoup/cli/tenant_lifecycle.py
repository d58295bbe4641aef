"""`recoup tenants disable|enable|delete|rotate-secret`: a tenant's life after creation (the
rules are `recoup.tenancy`'s; there is no HTTP surface for them).

Contract:

    recoup tenants disable NAME [--db URL] [--schema S] [--json]
        → {"tenant", "disabled_at"}        its tokens get 403, its jobs are held, its
                                             schedules do not fire; idempotent
    recoup tenants enable NAME [--json]
        → {"tenant", "disabled_at": null}  its held jobs run (overdue ones at once)
    recoup tenants delete NAME [--yes] [--json]
        → {"tenant", "deleted": {table: rows}}
          the tenant must be disabled and have no attempt running (exit 1 otherwise); asks
          for confirmation on a terminal unless --yes, and refuses without --yes elsewhere
    recoup tenants rotate-secret NAME [--overlap 24h] [--json]
        → {"tenant", "signing_secret": "whsec_…", "previous_valid_until": INSTANT | null}
          the new secret, printed this once; the replaced one keeps signing beside it until
          `previous_valid_until` (`--overlap 0`: not at all). `default` is made on first use.

`default`, the embedded tenant of the Python API, is neither disabled nor deleted (exit 2).
An unknown tenant exits 1.
"""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from typing import Annotated

import typer

from recoup.cli._app import DbOption, JsonOption, SchemaOption, fail, print_json
from recoup.cli.tenants import _opened, tenants_app
from recoup.errors import InvalidInput, NotFound
from recoup.jobs.model import DEFAULT_TENANT, Tenant
from recoup.tenancy import (
    check_overlap,
    delete_tenant,
    disable_tenant,
    enable_tenant,
    refuse_default,
    rotate_signing_secret,
)
from recoup.timekeeping.clock import SystemClock
from recoup.timekeeping.instants import format_utc

NameArgument = Annotated[str, typer.Argument(help="The tenant's name.")]

_DURATION = re.compile(r"(\d+)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
OVERLAP_ALLOWED = "expected a duration such as 0, 90m, 24h or 7d (30 days at most)"


def parse_overlap(text: str) -> timedelta:
    """`0`, `90s`, `90m`, `24h`, `7d`, or a sum of them (`1d12h`) → a timedelta within 0–30
    days; anything else → `InvalidInput` naming `--overlap`."""
    spec = text.strip().lower()
    if spec == "0":
        return timedelta(0)
    parts = _DURATION.findall(spec)
    if not parts or "".join(n + u for n, u in parts) != spec:
        raise InvalidInput("--overlap", text, OVERLAP_ALLOWED)
    overlap = timedelta(seconds=sum(int(n) * _UNIT_SECONDS[u] for n, u in parts))
    try:
        return check_overlap(overlap)
    except InvalidInput:
        raise InvalidInput("--overlap", text, OVERLAP_ALLOWED) from None


def _state_json(tenant: Tenant) -> dict[str, str | None]:
    return {
        "tenant": tenant.id,
        "disabled_at": None if tenant.disabled_at is None else format_utc(tenant.disabled_at),
    }


@tenants_app.command("disable")
def disable(
    name: NameArgument,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Disable a tenant: its tokens are refused (403), its jobs held, its schedules stopped."""
    with _opened(db, schema) as (store, _):
        tenant = disable_tenant(store, name, now=SystemClock().now())
    if tenant is None:
        raise NotFound(f"no tenant {name!r}")
    if json:
        print_json(_state_json(tenant))
        return
    typer.echo(f"disabled {tenant.id}: tokens refused, jobs held, schedules stopped")


@tenants_app.command("enable")
def enable(
    name: NameArgument,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Enable a disabled tenant: its tokens work again and its held jobs run."""
    with _opened(db, schema) as (store, _):
        tenant = enable_tenant(store, name, now=SystemClock().now())
    if tenant is None:
        raise NotFound(f"no tenant {name!r}")
    if json:
        print_json(_state_json(tenant))
        return
    typer.echo(f"enabled {tenant.id}: held jobs run, overdue ones at once")


@tenants_app.command("delete")
def delete(
    name: NameArgument,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Delete a disabled tenant and every row of it (jobs, runs, schedules, tokens, keys,
    invoices…), in one transaction. Cannot be undone."""
    refuse_default(name, "deleted")  # before asking
    if not yes:
        if not sys.stdin.isatty():
            fail(f"deleting tenant {name!r} cannot be undone: pass --yes to confirm")
        typer.confirm(
            f"Delete tenant {name!r} and all its jobs, runs, schedules and invoices?", abort=True
        )
    with _opened(db, schema) as (store, _):
        deleted = delete_tenant(store, name)
    if deleted is None:
        raise NotFound(f"no tenant {name!r}")
    if json:
        print_json({"tenant": name, "deleted": deleted})
        return
    counts = ", ".join(f"{rows} {table}" for table, rows in deleted.items() if rows)
    typer.echo(f"deleted {name}: {counts}")


@tenants_app.command("rotate-secret")
def rotate_secret(
    name: Annotated[str, typer.Argument(help="The tenant's name (`default`: the embedded one).")],
    overlap: Annotated[
        str,
        typer.Option(
            help="How long the replaced secret keeps signing beside the new one (0, 90m, 24h, 7d)."
        ),
    ] = "24h",
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Give a tenant a new signing secret, printed this once. Requests carry both signatures
    for the overlap, so receivers can switch to the new secret meanwhile."""
    from recoup.jobs.scheduler import Scheduler

    window = parse_overlap(overlap)
    now = SystemClock().now()
    with _opened(db, schema) as (store, _):
        if name == DEFAULT_TENANT:
            Scheduler(store).default_tenant()
        tenant = rotate_signing_secret(store, name, now=now, overlap=window)
    if tenant is None:
        raise NotFound(f"no tenant {name!r}")
    until = tenant.previous_secret_until
    row = {
        "tenant": tenant.id,
        "signing_secret": tenant.signing_secret,
        "previous_valid_until": None if until is None else format_utc(until),
    }
    if json:
        print_json(row)
        return
    typer.echo(f"signing secret: {tenant.signing_secret}   (shown once)")
    if until is None:
        typer.echo("the previous secret no longer signs")
    else:
        typer.echo(f"the previous secret also signs until {row['previous_valid_until']}")


__all__ = ["OVERLAP_ALLOWED", "parse_overlap"]
