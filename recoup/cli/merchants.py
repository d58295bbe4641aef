"""`recoup merchants …`: tag merchant ids and read the review queue of flagged ones.

Contract:

    recoup merchants tag TENANT MERCHANT_ID --tag seasonal|new|other [--note TEXT]
        [--db URL|PATH] [--schema S] [--json]
        → {"merchant_id", "tag", "note", "tagged_at"}   (replaces the id's tag, if any)
    recoup merchants untag TENANT MERCHANT_ID [--json]
        → {"merchant_id", "removed": true|false}
    recoup merchants review TENANT [--min-volume N] [--now ISO] [--json]
        → {"now", "since", "review_queue": [...], "suppressed": [...], "tags": [...]}
          (what GET /v1/dunning/review-queue answers)

A low-volume merchant id with a decline-code spike against its own baseline is flagged for
review; a tag (seasonal, newly onboarded, other; with a note) keeps it out of the queue until
its data contradicts the tag. `default` is the embedded tenant. Bad input: one line naming the
argument or option, exit 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from recoup.cli._app import DbOption, JsonOption, SchemaOption, app, print_json
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import format_utc, parse_instant

if TYPE_CHECKING:
    from recoup.analytics.recovery import MerchantTag, ReviewItem

merchants_app = typer.Typer(
    help="Merchant ids of the recovery report: tag, untag, and the review queue.",
    no_args_is_help=True,
)
app.add_typer(merchants_app, name="merchants")

TenantArgument = Annotated[str, typer.Argument(help="The tenant (`default`: the embedded one).")]
MerchantArgument = Annotated[str, typer.Argument(help="The merchant id, as in the failures.")]
# What `InvalidInput` names inside, as the user typed it here.
_SPELLED = {"merchant_id": "MERCHANT_ID", "note": "--note", "tag": "--tag"}


def _tag_json(tag: MerchantTag) -> dict[str, Any]:
    return {
        "merchant_id": tag.merchant_id,
        "tag": tag.tag,
        "note": tag.note,
        "tagged_at": format_utc(tag.tagged_at),
    }


@merchants_app.command("tag")
def tag_merchant(
    tenant: TenantArgument,
    merchant_id: MerchantArgument,
    tag: Annotated[str, typer.Option(help="seasonal, new (newly onboarded) or other.")],
    note: Annotated[str, typer.Option(help="Why, for the next reader.")] = "",
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Tag a merchant id (replacing its tag): the review queue leaves it out until its data
    contradicts the tag."""
    from recoup.cli._tenant_store import opened_store
    from recoup.recovery.reporting import Reports
    from recoup.timekeeping.clock import SystemClock

    with opened_store(db, schema, tenant) as store:
        try:
            stored = Reports(store, SystemClock()).tag(tenant, merchant_id, tag, note)
        except InvalidInput as exc:
            raise InvalidInput(_SPELLED.get(exc.field, exc.field), exc.value, exc.allowed) from None
    if json:
        print_json(_tag_json(stored))
        return
    typer.echo(f"tagged {stored.merchant_id} as {stored.tag}" + (f": {note}" if note else ""))


@merchants_app.command("untag")
def untag_merchant(
    tenant: TenantArgument,
    merchant_id: MerchantArgument,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Remove a merchant id's tag: it may be flagged again. Untagging twice is harmless."""
    from recoup.cli._tenant_store import opened_store
    from recoup.recovery.reporting import Reports
    from recoup.timekeeping.clock import SystemClock

    with opened_store(db, schema, tenant) as store:
        removed = Reports(store, SystemClock()).untag(tenant, merchant_id)
    if json:
        print_json({"merchant_id": merchant_id, "removed": removed})
        return
    typer.echo(f"untagged {merchant_id}" if removed else f"{merchant_id} had no tag")


@merchants_app.command("review")
def review(
    tenant: TenantArgument,
    min_volume: Annotated[
        int | None,
        typer.Option(min=1, help="Fewer outcomes a week than this: judged over a month (30)."),
    ] = None,
    now: Annotated[
        str | None,
        typer.Option(metavar="ISO", help="Judge as of this instant (default: the clock)."),
    ] = None,
    db: DbOption = "sqlite:///recoup.db",
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """The review queue: low-volume merchant ids with a decline-code spike against their own
    baseline, tagged ones only when the data contradicts the tag; then those a tag
    suppresses, and every tag."""
    from recoup.analytics.recovery import report_json
    from recoup.cli._tenant_store import opened_store
    from recoup.recovery.reporting import Reports
    from recoup.timekeeping.clock import SystemClock

    as_of = None if now is None else parse_instant("--now", now)
    with opened_store(db, schema, tenant) as store:
        reports = Reports(store, SystemClock())
        built, window = reports.build(tenant, min_volume=min_volume, now=as_of)
        tags = reports.tags(tenant)
    if json:
        document = report_json(built)
        print_json(
            {
                "now": format_utc(window.now),
                "since": format_utc(window.since),
                "review_queue": document["review_queue"],
                "suppressed": document["suppressed"],
                "tags": [_tag_json(t) for t in tags],
            }
        )
        return
    _print_review(built.review_queue, built.suppressed, tags)


def _print_review(
    queue: list[ReviewItem], suppressed: list[ReviewItem], tags: list[MerchantTag]
) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for title, items in (("Review queue", queue), ("Suppressed by a tag", suppressed)):
        table = Table(title=f"{title} ({len(items)})", title_justify="left")
        for column in ("merchant id", "window", "why", "tag"):
            table.add_column(column)
        for item in items:
            tagged = f"{item.tag.tag}: {item.tag.note}" if item.tag else ""
            table.add_row(item.merchant_id, f"{item.window_days} days", item.reason, tagged)
        console.print(table)
    table = Table(title=f"Tags ({len(tags)})", title_justify="left")
    for column in ("merchant id", "tag", "note", "tagged at"):
        table.add_column(column)
    for t in tags:
        table.add_row(t.merchant_id, t.tag, t.note, format_utc(t.tagged_at))
    console.print(table)
