"""`recoup stripe check`: is a tenant ready for Stripe-native dunning?

Contract:

    recoup stripe check NAME [--public-url URL] [--db URL] [--schema S] [--json]
        → {"tenant", "charge_with", "key_ok", "livemode", "request_id", "detail",
           "webhook_secret_set", "webhook_url", "events", "reminders"}

It verifies the tenant's Stripe key against the API (one read: `GET /v1/invoices?limit=1`,
which a restricted key with invoice access may make), prints the URL to point Stripe's
webhook endpoint at and the event types to subscribe to, and reminds that Stripe's own
retries must be off. Exit 0 when the key answers, 1 when it does not or there is none.
"""

from __future__ import annotations

from typing import Annotated

import typer

from recoup.cli._app import DbOption, JsonOption, SchemaOption, app, print_json, store_options
from recoup.errors import InvalidInput, NotFound
from recoup.jobs.model import DEFAULT_TENANT

stripe_app = typer.Typer(
    help="Stripe-native dunning: check a tenant's set-up.", no_args_is_help=True
)
app.add_typer(stripe_app, name="stripe")

REMINDERS = (
    "Turn off Stripe's own retries (Billing → Revenue recovery → Retries: Smart Retries off, "
    "no custom schedule), or Stripe and Recoup both retry.",
    "Turn off Stripe's failed-payment emails if Recoup's messages replace them.",
)


@stripe_app.command("check")
def check(
    name: Annotated[str, typer.Argument(help="The tenant's name (`default`: the embedded one).")],
    public_url: Annotated[
        str | None,
        typer.Option(help="Recoup's public base URL (https://…), to print the webhook's URL."),
    ] = None,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Verify a tenant's Stripe key and print what to set at Stripe."""
    from recoup.cli._secrets import secret_box, stripe_accounts
    from recoup.jobs.scheduler import Scheduler
    from recoup.recovery.hosted_settings import HostedSettings
    from recoup.recovery.service import Dunning
    from recoup.recovery.stripe_events import SUPPORTED
    from recoup.recovery.stripe_intake import StripeIntake
    from recoup.storage import open_store
    from recoup.timekeeping.clock import SystemClock

    if public_url is not None and not public_url.startswith(("https://", "http://")):
        raise InvalidInput("--public-url", public_url, "expected an http(s) URL")
    path = f"/v1/intake/stripe/{name}"
    store = open_store(db, **store_options(schema, db))
    try:
        if name != DEFAULT_TENANT and store.get_tenant(name) is None:
            raise NotFound(f"no tenant {name!r}; `recoup tenants create {name}` creates it")
        box = secret_box(db)
        charging = store.hosted.get_hosted_charging(name)
        intake = StripeIntake(Dunning(Scheduler(store, clock=SystemClock()), store), store, box=box)
        secret_set = intake.tenant_settings.settings(name).stripe_webhook_secret is not None
        settings = HostedSettings(store.hosted, box, now=SystemClock().now)
        charge_with = settings.charge_with(name)
    finally:
        store.close()
    row: dict[str, object] = {
        "tenant": name,
        "charge_with": charge_with,
        "key_ok": False,
        "livemode": None,
        "request_id": None,
        "detail": "no Stripe key: recoup tenants configure NAME --charge-with stripe "
        "--stripe-api-key-file PATH",
        "webhook_secret_set": secret_set,
        "webhook_url": (public_url.rstrip("/") + path) if public_url else path,
        "events": list(SUPPORTED),
        "reminders": list(REMINDERS),
    }
    if charging is not None:
        accounts = stripe_accounts(box)
        try:
            found = accounts.client(charging).check()
        finally:
            accounts.close()
        row.update(
            key_ok=found.ok,
            livemode=found.livemode,
            request_id=found.request_id,
            detail=found.detail,
        )
    if json:
        print_json(row)
    else:
        _print(row, secret_set)
    if not row["key_ok"]:
        raise typer.Exit(1)


def _print(row: dict[str, object], secret_set: bool) -> None:
    mode = {True: "live", False: "test", None: "unknown"}[row["livemode"]]  # type: ignore[index]
    verdict = f"answers ({mode} mode)" if row["key_ok"] else f"fails: {row['detail']}"
    typer.echo(f"tenant:         {row['tenant']}")
    typer.echo(f"charge with:    {row['charge_with']}")
    typer.echo(f"stripe key:     {verdict}")
    typer.echo(
        "webhook secret: set"
        if secret_set
        else "webhook secret: not set (--stripe-webhook-secret whsec_… or -)"
    )
    typer.echo(f"webhook url:    {row['webhook_url']}")
    typer.echo("subscribe to:   " + ", ".join(row["events"]))  # type: ignore[arg-type]
    for reminder in row["reminders"]:  # type: ignore[attr-defined]
        typer.echo(f"remember:       {reminder}")
