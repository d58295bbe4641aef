"""`recoup schedules …`: list, show, pause and resume a tenant's recurring schedules.

Contract:

    recoup schedules list [--tenant T] [--state active|paused|ended] [--name N]
        [--metadata KEY=VALUE ...] [--limit N] [--cursor C] [--db URL] [--schema S] [--json]
        → {"schedules": [...], "next_cursor"}      (by name, as GET /v1/schedules)
    recoup schedules show (SCHEDULE_ID | --name N) [--count N] [--tenant T] [--json]
        → {"schedule": {...}, "upcoming": [...]}   (the next N occurrences after now)
    recoup schedules pause (SCHEDULE_ID | --name N) [--tenant T] [--json]
    recoup schedules resume (SCHEDULE_ID | --name N) [--tenant T] [--json]
        → the schedule (pausing a paused one, or resuming an active one, is harmless)

Every command takes `--url URL --token T` (or RECOUP_URL, RECOUP_TOKEN) instead of `--db`: it
then acts on a remote `recoup serve` through its API, for the token's tenant, and prints the
same; a server's refusal is one line, exit 2 (a 4xx) or 1 (a 5xx, or no answer).

A deleted schedule is unknown here, as it is to the API. `default` is the embedded tenant.
Bad input: one line naming the option, the value and what is allowed, exit 2; an unknown
schedule or tenant: one line naming it, exit 2.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from recoup.cli._app import JsonOption, SchemaOption, app, print_json
from recoup.cli._job_sources import Jobs, ScheduleQuery, opened_jobs
from recoup.cli._records import (
    CursorOption,
    LimitOption,
    MetadataOption,
    checked_text,
    exactly_one,
    instant,
    metadata_filter,
    rule_text,
    schedule_json,
    shown,
    shown_row,
    spelled_as_typed,
    target_text,
)
from recoup.cli._where import DbOption, TenantOption, TokenOption, UrlOption, Where, where
from recoup.errors import InvalidInput
from recoup.jobs.schedules.model import ScheduleState

if TYPE_CHECKING:
    from recoup.wire.schemas import ScheduleOut

schedules_app = typer.Typer(
    help="A tenant's recurring schedules: list, show, pause, resume.", no_args_is_help=True
)
app.add_typer(schedules_app, name="schedules")


ScheduleIdArgument = Annotated[
    str | None, typer.Argument(help="The schedule's id (or give --name).", show_default=False)
]
ByNameOption = Annotated[
    str | None,
    typer.Option("--name", help="The schedule's name instead of its id.", show_default=False),
]
_SPELLED = {"cursor": "--cursor", "limit": "--limit"}
MAX_COUNT = 100  # occurrences `show` prints, as GET /v1/schedules/{id}/upcoming's `count`


@schedules_app.command("list")
def list_schedules(
    tenant: TenantOption = None,
    state: Annotated[
        ScheduleState | None,
        typer.Option(help="Only active, paused or ended (no occurrence left) schedules."),
    ] = None,
    metadata: MetadataOption = None,
    name: Annotated[
        str | None, typer.Option(help="Only the schedule of exactly this name.")
    ] = None,
    limit: LimitOption = 50,
    cursor: CursorOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """The tenant's schedules by name, a page at a time."""
    checked = {"name": checked_text("--name", name), "cursor": checked_text("--cursor", cursor)}
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    with opened_jobs(place) as jobs, spelled_as_typed(_SPELLED):
        page = jobs.list_schedules(
            ScheduleQuery(state=state, metadata=metadata_filter(metadata), limit=limit, **checked)
        )
    if json:
        print_json(
            {
                "schedules": [schedule_json(s) for s in page.schedules],
                "next_cursor": page.next_cursor,
            }
        )
        return
    _print_schedules(page.schedules, f"Schedules of {jobs.tenant}")
    if page.next_cursor is not None:
        typer.echo(f"more: --cursor {page.next_cursor}")


@schedules_app.command("show")
def show_schedule(
    schedule_id: ScheduleIdArgument = None,
    name: ByNameOption = None,
    count: Annotated[int, typer.Option(help=f"How many next occurrences (1–{MAX_COUNT}).")] = 5,
    tenant: TenantOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """One schedule and its next occurrences after now (a paused one's too: what it would
    fire once resumed)."""
    if not 1 <= count <= MAX_COUNT:
        raise InvalidInput("--count", count, f"expected 1–{MAX_COUNT}")
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    with opened_jobs(place) as jobs:
        schedule = _find(jobs, schedule_id, name)
        upcoming = jobs.upcoming(schedule, count)
    if json:
        print_json(
            {"schedule": schedule_json(schedule), "upcoming": [instant(u) for u in upcoming]}
        )
        return
    _print_schedule(schedule, upcoming)


@schedules_app.command("pause")
def pause_schedule(
    schedule_id: ScheduleIdArgument = None,
    name: ByNameOption = None,
    tenant: TenantOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """Stop materialising occurrences (jobs already materialised stay)."""
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    _set_paused(schedule_id, name, place, json, paused=True)


@schedules_app.command("resume")
def resume_schedule(
    schedule_id: ScheduleIdArgument = None,
    name: ByNameOption = None,
    tenant: TenantOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """Materialise again from the first occurrence after now (the paused ones are skipped)."""
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    _set_paused(schedule_id, name, place, json, paused=False)


def _set_paused(
    schedule_id: str | None, name: str | None, place: Where, json: bool, *, paused: bool
) -> None:
    with opened_jobs(place) as jobs:
        schedule = jobs.set_paused(_find(jobs, schedule_id, name).id, paused)
    if json:
        print_json(schedule_json(schedule))
        return
    state = "paused" if schedule.paused else f"active, next at {instant(schedule.next_fire_at)}"
    typer.echo(f"schedule {shown(schedule.name).plain} ({schedule.id}): {state}")


def _find(jobs: Jobs, schedule_id: str | None, name: str | None) -> ScheduleOut:
    """The live schedule of that id or name; `NotFound` for a deleted one, as in the API."""
    exactly_one(
        "which schedule", SCHEDULE_ID=schedule_id, **{"--name": checked_text("--name", name)}
    )
    if name is not None:
        return jobs.schedule_named(name)
    assert schedule_id is not None
    return jobs.get_schedule(schedule_id)


def _print_schedules(schedules: list[ScheduleOut], title: str) -> None:
    from rich.table import Table

    from recoup.cli._output import console

    table = Table(title=f"{title} ({len(schedules)})", title_justify="left")
    for column in ("id", "name", "rule", "state", "next (UTC)"):
        table.add_column(column)
    for s in schedules:
        table.add_row(
            *shown_row(s.id, s.name, rule_text(s), s.state.value, instant(s.next_fire_at) or "")
        )
    console().print(table)


def _print_schedule(schedule: ScheduleOut, upcoming: list[datetime]) -> None:
    from rich.table import Table

    from recoup.cli._output import console

    table = Table(title=f"Schedule {schedule.id}", title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    rows = [
        ("name", schedule.name),
        ("rule", rule_text(schedule)),
        ("target", target_text(schedule.target)),
        ("state", schedule.state.value),
        ("missed", schedule.missed),
        ("next (UTC)", instant(schedule.next_fire_at) or ""),
        ("created (UTC)", instant(schedule.created_at) or ""),
    ]
    for field, value in rows:
        table.add_row(*shown_row(field, value))
    out = console()
    out.print(table)
    nexts = Table(title=f"Next {len(upcoming)} occurrences", title_justify="left")
    nexts.add_column("UTC")
    nexts.add_column(schedule.timezone)
    for at in upcoming:
        nexts.add_row(*shown_row(instant(at) or "", _local(at, schedule.timezone)))
    out.print(nexts)


def _local(at: datetime, zone: str) -> str:
    from zoneinfo import ZoneInfo

    return at.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z")
