"""`recoup merchants …`: tag merchant ids and read the review queue of flagged ones.

Contract:

    recoup merchants tag TENANT MERCHANT_ID --tag seasonal|new|other [--note TEXT]
        [--db URL|PATH] [--schema S | --url URL --token T] [--json]
        → {"merchant_id", "tag", "note", "tagged_at"}   (replaces the id's tag, if any)
    recoup merchants untag TENANT MERCHANT_ID [--json]
        → {"merchant_id", "removed": true|false}
    recoup merchants review TENANT [--min-volume N] [--now ISO] [--json]
        → {"now", "since", "review_queue": [...], "suppressed": [...], "tags": [...]}
          (what GET /v1/dunning/review-queue answers)

A low-volume merchant id with a decline-code spike against its own baseline is flagged for
review; a tag (seasonal, newly onboarded, other; with a note) keeps it out of the queue until
its data contradicts the tag. `default` is the embedded tenant. Bad input: one line naming the
argument or option, exit 2. With `--url URL --token T` (or RECOUP_URL, RECOUP_TOKEN) instead
of `--db`, each acts on a remote `recoup serve` (PUT and DELETE
/v1/dunning/merchants/{id}/tag, GET /v1/dunning/review-queue) and prints what it prints on the
database; TENANT must then be the token's, and `review --now` needs the database (the server
judges on its own clock).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from recoup.cli._app import JsonOption, SchemaOption, app, print_json
from recoup.cli._where import (
    DbOption,
    TokenOption,
    UrlOption,
    Where,
    opened_client,
    opened_store,
    where,
)
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import format_utc, parse_instant

if TYPE_CHECKING:
    from recoup.recovery.reporting import Reports
    from recoup.wire.reports import ReviewItemOut, TagOut

merchants_app = typer.Typer(
    help="Merchant ids of the recovery report: tag, untag, and the review queue.",
    no_args_is_help=True,
)
app.add_typer(merchants_app, name="merchants")

TenantArgument = Annotated[str, typer.Argument(help="The tenant (`default`: the embedded one).")]
MerchantArgument = Annotated[str, typer.Argument(help="The merchant id, as in the failures.")]
# What `InvalidInput` names inside, as the user typed it here.
_SPELLED = {"merchant_id": "MERCHANT_ID", "note": "--note", "tag": "--tag"}


def _tag_json(tag: TagOut) -> dict[str, Any]:
    return {
        "merchant_id": tag.merchant_id,
        "tag": tag.tag,
        "note": tag.note,
        "tagged_at": format_utc(tag.tagged_at),
    }


def _place(
    tenant: str, db: str | None, schema: str | None, url: str | None, token: str | None
) -> Where:
    return where(db=db, schema=schema, tenant=tenant, url=url, token=token)


@contextlib.contextmanager
def _reports(place: Where) -> Iterator[tuple[Reports, str]]:
    """The recovery reports of a database's tenant, on the system clock."""
    from recoup.recovery.reporting import Reports
    from recoup.timekeeping.clock import SystemClock

    with opened_store(place) as (store, tenant):
        yield Reports(store, SystemClock()), tenant


@merchants_app.command("tag")
def tag_merchant(
    tenant: TenantArgument,
    merchant_id: MerchantArgument,
    tag: Annotated[str, typer.Option(help="seasonal, new (newly onboarded) or other.")],
    note: Annotated[str, typer.Option(help="Why, for the next reader.")] = "",
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """Tag a merchant id (replacing its tag): the review queue leaves it out until its data
    contradicts the tag."""
    from recoup.analytics.recovery import TAG_KINDS
    from recoup.wire.reports import TagOut

    place = _place(tenant, db, schema, url, token)
    if tag not in TAG_KINDS:  # checked here so both places name --tag alike
        raise InvalidInput("--tag", tag, f"expected one of {', '.join(TAG_KINDS)}")
    if place.remote:
        with opened_client(place) as (client, _):
            stored = client.tag_merchant(merchant_id, tag, note=note)
    else:
        with _reports(place) as (reports, tenant_id):
            try:
                stored = TagOut.of(reports.tag(tenant_id, merchant_id, tag, note))
            except InvalidInput as exc:
                field = _SPELLED.get(exc.field, exc.field)
                raise InvalidInput(field, exc.value, exc.allowed) from None
    if json:
        print_json(_tag_json(stored))
        return
    typer.echo(f"tagged {stored.merchant_id} as {stored.tag}" + (f": {note}" if note else ""))


@merchants_app.command("untag")
def untag_merchant(
    tenant: TenantArgument,
    merchant_id: MerchantArgument,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """Remove a merchant id's tag: it may be flagged again. Untagging twice is harmless."""
    place = _place(tenant, db, schema, url, token)
    if place.remote:
        with opened_client(place) as (client, _):
            # DELETE answers 204 either way: whether there was a tag is read from the list.
            had = {t.merchant_id for t in client.review_queue().tags}
            client.untag_merchant(merchant_id)
        removed = merchant_id in had
    else:
        with _reports(place) as (reports, tenant_id):
            removed = reports.untag(tenant_id, merchant_id)
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
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """The review queue: low-volume merchant ids with a decline-code spike against their own
    baseline, tagged ones only when the data contradicts the tag; then those a tag
    suppresses, and every tag."""
    from recoup.analytics.recovery import report_json
    from recoup.wire.reports import ReviewQueueOut

    place = _place(tenant, db, schema, url, token)
    as_of = None if now is None else parse_instant("--now", now)
    if place.remote:
        if as_of is not None:
            raise InvalidInput("--now", now, "a database's option: the server judges on its clock")
        with opened_client(place) as (client, _):
            queue = client.review_queue(min_volume=min_volume)
    else:
        with _reports(place) as (reports, tenant_id):
            built, window = reports.build(tenant_id, min_volume=min_volume, now=as_of)
            queue = ReviewQueueOut.of(
                report_json(built), now=window.now, since=window.since, tags=reports.tags(tenant_id)
            )
    if json:
        print_json(
            {
                "now": format_utc(queue.now),
                "since": format_utc(queue.since),
                "review_queue": [_item_json(i) for i in queue.review_queue],
                "suppressed": [_item_json(i) for i in queue.suppressed],
                "tags": [_tag_json(t) for t in queue.tags],
            }
        )
        return
    _print_review(queue.review_queue, queue.suppressed, queue.tags)


def _item_json(item: ReviewItemOut) -> dict[str, Any]:
    """A flagged id as the report's JSON has it (`report_json`'s `review_queue` rows)."""
    row = item.model_dump(mode="json")
    row["tag"] = None if item.tag is None else _tag_json(item.tag)
    return row


def _print_review(
    queue: list[ReviewItemOut], suppressed: list[ReviewItemOut], tags: list[TagOut]
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
