"""`recoup emails preview`: one customer email rendered with sample data, as the tenant's
customers would read it.

Contract:

    recoup emails preview --tenant NAME --event KIND [--templates DIR] [--locale L]
        [--html] [--json] [--db URL [--schema S] | --url URL --token T]
        KIND: payment_failed | retry_failed | final_warning | recovered | exhausted |
              card_expiring
        → the subject and the text part (default), the HTML part (--html), or
          {"tenant", "event", "locale", "timezone", "subject", "text", "html"} (--json)

With a database (`--db`, or RECOUP_DB), the tenant must exist and the email is the one its
settings make (`recovery.email_preview`): its policy's final action, its sender's name, reply
address, templates (`--templates` replaces them) and update-card link with a sample token;
without one, NAME is only the name the email shows, over the shipped templates. With `--url URL
--token T` (or RECOUP_URL, RECOUP_TOKEN) a remote `recoup serve` renders the email of the
token's tenant (NAME must be it) with its settings, as `GET /v1/dunning/emails/preview`, and it
prints the same; `--templates` is a directory here, so it needs a database. A bad kind or
locale exits 2 with one line naming the option and what it allows.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from recoup.cli._app import JsonOption, SchemaOption, app, print_json
from recoup.cli._where import TokenOption, UrlOption, Where, opened_client, where
from recoup.errors import InvalidInput

if TYPE_CHECKING:
    from recoup.wire.emails import EmailPreviewOut

emails_app = typer.Typer(help="Customer emails: preview what a tenant's customers are sent.")
app.add_typer(emails_app, name="emails")


@emails_app.command("preview")
def preview_email(
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant whose email it is.")],
    event: Annotated[
        str,
        typer.Option(
            "--event",
            help="The kind of email: payment_failed, retry_failed, final_warning, recovered, "
            "exhausted or card_expiring.",
        ),
    ],
    templates: Annotated[
        Path | None,
        typer.Option("--templates", help="A directory of templates overriding the defaults."),
    ] = None,
    locale: Annotated[
        str | None, typer.Option("--locale", help='The customer\'s locale ("fr_FR", "de-DE").')
    ] = None,
    html: Annotated[bool, typer.Option("--html", help="Print the HTML part.")] = False,
    as_json: JsonOption = False,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Database URL: the tenant's settings (or RECOUP_DB). Optional."),
    ] = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Render one email with sample data: the subject and text, the HTML, or both as JSON."""
    if templates is not None and not templates.is_dir():
        raise InvalidInput("--templates", str(templates), "expected a directory of templates")
    database = db or os.environ.get("RECOUP_DB")
    if url is not None or token is not None:
        place = where(db=database, schema=schema, tenant=tenant, url=url, token=token)
        if templates is not None:
            raise InvalidInput("--templates", str(templates), "a directory here: not with --url")
        shown = _remote(place, event, locale)
    else:
        shown = _local(database, schema, tenant, event, locale, templates)
    if as_json:
        print_json(shown.model_dump())
    elif html:
        typer.echo(shown.html, nl=False)
    else:
        typer.echo(f"Subject: {shown.subject}\n\n{shown.text}", nl=False)


def _local(
    database: str | None,
    schema: str | None,
    tenant: str,
    event: str,
    locale: str | None,
    templates: Path | None,
) -> EmailPreviewOut:
    """The email as the tenant's settings in `database` make it, or (no database) over the
    shipped templates with `tenant` only as the name shown."""
    from recoup.messages.preview import preview
    from recoup.wire.emails import EmailPreviewOut

    fields = {"templates_dir": templates, "kind_field": "--event", "locale_field": "--locale"}
    if database:
        from recoup.cli._tenant_store import opened_store
        from recoup.recovery.email_preview import tenant_preview

        with opened_store(database, schema, tenant) as store:
            made = tenant_preview(store, tenant, event, locale=locale, **fields)  # type: ignore[arg-type]
    else:
        made = preview(tenant, event, locale=locale, **fields)  # type: ignore[arg-type]
    return EmailPreviewOut.model_validate(made.as_json())


def _remote(place: Where, event: str, locale: str | None) -> EmailPreviewOut:
    """The email as the server renders it for the token's tenant; a bad kind or locale is
    named `--event` or `--locale` as it is here (the server would name its query parameter)."""
    from recoup.messages.formatting import check_locale
    from recoup.messages.rendering import parse_kind

    parse_kind(event, field="--event")
    if locale is not None:
        check_locale(locale, field="--locale")
    with opened_client(place) as (client, _):
        return client.preview_email(event, locale=locale)
