"""`recoup secrets …`: the key that seals provider secrets at rest (`recoup.sealed`).

Contract:

    recoup secrets new-key
        → a new key on stdout, for RECOUP_SECRET_KEY
    recoup secrets rotate [--db URL] [--schema S] [--json]
        → {"stripe_api_keys": N, "stripe_webhook_secrets": N, "smtp_urls": N}

Rotation: put the new key first in RECOUP_SECRET_KEY (`new,old`), run `recoup secrets
rotate` (every stored secret is sealed again with the new key; one stored before sealing is
sealed for the first time), restart the servers and workers, then drop the old key.
"""

from __future__ import annotations

import typer

from recoup.cli._app import DbOption, JsonOption, SchemaOption, app, print_json, store_options
from recoup.cli._where import LocalOnlyUrlOption

secrets_app = typer.Typer(help="The key that seals provider secrets at rest.", no_args_is_help=True)
app.add_typer(secrets_app, name="secrets")


@secrets_app.command("new-key")
def new_key(url: LocalOnlyUrlOption = None) -> None:
    """Print a new secret key (for RECOUP_SECRET_KEY)."""
    from recoup.sealed import new_key as make

    typer.echo(make())


@secrets_app.command("rotate")
def rotate(
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
    url: LocalOnlyUrlOption = None,
) -> None:
    """Seal every stored secret again with the current key (the first of RECOUP_SECRET_KEY)."""
    from recoup.cli._secrets import secret_box
    from recoup.recovery.email_settings import EmailSettings
    from recoup.recovery.hosted_settings import HostedSettings
    from recoup.recovery.stripe_intake_settings import StripeIntakeSettings
    from recoup.storage import open_store
    from recoup.timekeeping.clock import SystemClock

    store = open_store(db, **store_options(schema, db))
    try:
        box = secret_box(db)
        keys = HostedSettings(store.hosted, box, now=SystemClock().now).reseal()
        tenants = [t.id for t in store.list_tenants()]
        secrets = StripeIntakeSettings(store, box, now=SystemClock().now).reseal(tenants)
        smtp_urls = EmailSettings(store.messages, box, now=SystemClock().now).reseal()
    finally:
        store.close()
    row = {"stripe_api_keys": keys, "stripe_webhook_secrets": secrets, "smtp_urls": smtp_urls}
    if json:
        print_json(row)
        return
    typer.echo(
        f"sealed again: {keys} Stripe API keys, {secrets} Stripe webhook secrets,"
        f" {smtp_urls} SMTP URLs"
    )
