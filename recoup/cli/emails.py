"""`recoup emails preview`: one customer email rendered with sample data, as the tenant's
customers would read it.

Contract:

    recoup emails preview --tenant NAME --event KIND [--templates DIR] [--locale L]
        [--html] [--json] [--db URL [--schema S]]
        KIND: payment_failed | retry_failed | final_warning | recovered | exhausted |
              card_expiring
        → the subject and the text part (default), the HTML part (--html), or
          {"tenant", "event", "locale", "timezone", "subject", "text", "html"} (--json)

With a database (`--db`, or RECOUP_DB), the tenant must exist and the email is the one its
settings make (`recovery.email_preview`): its policy's final action, its sender's name, reply
address, templates (`--templates` replaces them) and update-card link with a sample token;
without one, NAME is only the name the email shows, over the shipped templates. A bad kind or locale
exits 2 with one line naming the option and what it allows.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from recoup.cli._app import JsonOption, SchemaOption, app, print_json
from recoup.errors import InvalidInput

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
) -> None:
    """Render one email with sample data: the subject and text, the HTML, or both as JSON."""
    if templates is not None and not templates.is_dir():
        raise InvalidInput("--templates", str(templates), "expected a directory of templates")
    url = db or os.environ.get("RECOUP_DB")
    if url:
        from recoup.cli._tenant_store import opened_store
        from recoup.recovery.email_preview import tenant_preview

        with opened_store(url, schema, tenant) as store:
            shown = tenant_preview(
                store,
                tenant,
                event,
                locale=locale,
                templates_dir=templates,
                kind_field="--event",
                locale_field="--locale",
            )
    else:
        from recoup.messages.preview import preview

        shown = preview(
            tenant,
            event,
            locale=locale,
            templates_dir=templates,
            kind_field="--event",
            locale_field="--locale",
        )
    if as_json:
        print_json(shown.as_json())
    elif html:
        typer.echo(shown.rendered.html, nl=False)
    else:
        typer.echo(f"Subject: {shown.rendered.subject}\n\n{shown.rendered.text}", nl=False)
