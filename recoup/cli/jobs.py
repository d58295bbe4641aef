"""`recoup jobs …`: list, show, read the run log of, cancel and retry a tenant's jobs.

Contract:

    recoup jobs list [--tenant T] [--state S] [--name N] [--name-prefix P] [--group G]
        [--metadata KEY=VALUE ...] [--limit N] [--cursor C] [--db URL] [--schema S] [--json]
        → {"jobs": [...], "next_cursor"}            (newest first, as GET /v1/jobs)
    recoup jobs show (JOB_ID | --name N) [--tenant T] [--json]
        → {"job": {...}, "runs": [...]}            (by name: the live job, else the latest)
    recoup jobs runs JOB_ID [--tenant T] [--limit N] [--cursor C] [--json]
        → {"runs": [...], "next_cursor"}           (first attempt first)
    recoup jobs cancel (JOB_ID | --name N) [--tenant T] [--json]
        → by id: the job (one that already ended is left as it is);
          by name: {"cancelled": n}, the live jobs of that name cancelled
    recoup jobs retry JOB_ID [--tenant T] [--json]
        → the job, scheduled again now with a fresh budget of attempts (a failed job only:
          any other is refused, exit 1)
    recoup jobs redrive [--tenant T] [--group G] [--name-prefix P] [--since ISO] [--until ISO]
        [--error TEXT] [--dry-run] [--yes] [--json]
        → {"matched", "redriven", "dry_run", "filter"}: the failed jobs the filter names
          counted (--dry-run), else counted, confirmed (or --yes) and redriven, each with the
          budget of attempts it was created with; an audit line on the `recoup.audit` logger
          (who: cli:<user>); declining the confirmation redrives nothing (exit 1)

Every command takes `--url URL --token T` (or RECOUP_URL, RECOUP_TOKEN) instead of `--db`: it
then acts on a remote `recoup serve` through its API, for the token's tenant, and prints the
same; a server's refusal is one line, exit 2 (a 4xx) or 1 (a 5xx, or no answer).

`default` is the embedded tenant. Bad input: one line naming the option, the value and what is
allowed, exit 2; an unknown job or tenant: one line naming it, exit 2 (bad input, from
a database or a server alike).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from recoup.cli._app import JsonOption, SchemaOption, app, fail, print_json
from recoup.cli._job_sources import JobQuery, Jobs, opened_jobs
from recoup.cli._records import (
    CursorOption,
    LimitOption,
    MetadataOption,
    checked_text,
    exactly_one,
    instant,
    job_json,
    metadata_filter,
    run_json,
    shown_row,
    spelled_as_typed,
    target_text,
)
from recoup.cli._where import DbOption, TenantOption, TokenOption, UrlOption, where
from recoup.jobs.model import JobState
from recoup.timekeeping.instants import parse_instant

if TYPE_CHECKING:
    from recoup.wire.schemas import JobOut, RunOut

jobs_app = typer.Typer(
    help="A tenant's jobs: list, show, their run log, cancel, retry.", no_args_is_help=True
)
app.add_typer(jobs_app, name="jobs")

JobIdArgument = Annotated[
    str | None, typer.Argument(help="The job's id (or give --name).", show_default=False)
]
ByNameOption = Annotated[
    str | None,
    typer.Option("--name", help="The job's name instead of its id.", show_default=False),
]
_SPELLED = {"cursor": "--cursor", "limit": "--limit"}


@jobs_app.command("list")
def list_jobs(
    tenant: TenantOption = None,
    state: Annotated[JobState | None, typer.Option(help="Only jobs in this state.")] = None,
    name: Annotated[str | None, typer.Option(help="Only jobs of exactly this name.")] = None,
    name_prefix: Annotated[
        str | None, typer.Option(help="Only jobs whose name starts with this.")
    ] = None,
    group: Annotated[str | None, typer.Option(help="Only jobs of exactly this group.")] = None,
    metadata: MetadataOption = None,
    limit: LimitOption = 50,
    cursor: CursorOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """The tenant's jobs, newest first, a page at a time; filters combine."""
    query = JobQuery(
        state=state,
        name=checked_text("--name", name),
        name_prefix=checked_text("--name-prefix", name_prefix),
        group=checked_text("--group", group),
        metadata=metadata_filter(metadata),
        limit=limit,
        cursor=cursor,
    )
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    with opened_jobs(place) as jobs, spelled_as_typed(_SPELLED):
        page = jobs.list_jobs(query)
    if json:
        print_json({"jobs": [job_json(j) for j in page.jobs], "next_cursor": page.next_cursor})
        return
    # A group's jobs (an invoice's attempts) read in the order they run: attempt 1 first.
    shown = sorted(page.jobs, key=lambda j: (j.run_at, j.name or "")) if group else page.jobs
    _print_jobs(shown, f"Jobs of {jobs.tenant}")
    _print_next(page.next_cursor)


@jobs_app.command("show")
def show_job(
    job_id: JobIdArgument = None,
    name: ByNameOption = None,
    tenant: TenantOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """One job and its whole run log; by name, the live job of that name, else the latest."""
    exactly_one("which job", JOB_ID=job_id, **{"--name": checked_text("--name", name)})
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    with opened_jobs(place) as jobs:
        job = _find(jobs, job_id, name)
        runs = jobs.runs(job.id)
    if json:
        print_json({"job": job_json(job), "runs": [run_json(r) for r in runs]})
        return
    _print_job(job)
    _print_runs(runs, f"Runs of {job.id}")


@jobs_app.command("runs")
def job_runs(
    job_id: Annotated[str, typer.Argument(help="The job's id.")],
    tenant: TenantOption = None,
    limit: LimitOption = 50,
    cursor: CursorOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """The job's run log, first attempt first, a page at a time."""
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    with opened_jobs(place) as jobs, spelled_as_typed(_SPELLED):
        page = jobs.list_runs(job_id, limit, cursor)
    if json:
        print_json({"runs": [run_json(r) for r in page.runs], "next_cursor": page.next_cursor})
        return
    _print_runs(page.runs, f"Runs of {job_id}")
    _print_next(page.next_cursor)


@jobs_app.command("cancel")
def cancel_job(
    job_id: JobIdArgument = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name", help="Cancel the live job of this name instead.", show_default=False
        ),
    ] = None,
    tenant: TenantOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """Cancel a job by id (one that already ended is left as it is), or the live job of a
    name. An attempt in flight is stopped by its worker at its next heartbeat."""
    exactly_one("which job", JOB_ID=job_id, **{"--name": checked_text("--name", name)})
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    with opened_jobs(place) as jobs:
        if name is not None:
            cancelled = jobs.cancel_by_name(name)
            if json:
                print_json({"cancelled": cancelled})
            else:
                typer.echo(f"cancelled {cancelled} live job(s) named {name!r}")
            return
        assert job_id is not None
        before = jobs.get(job_id)
        job = jobs.cancel(job_id)
    if json:
        print_json(job_json(job))
    elif before.state.is_final:
        typer.echo(f"job {job.id} had already ended ({job.state.value}); left as it is")
    else:
        typer.echo(f"job {job.id}: {job.state.value}")


@jobs_app.command("retry")
def retry_job(
    job_id: Annotated[str, typer.Argument(help="The failed job's id.", show_default=False)],
    tenant: TenantOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """Redrive a job that failed for good (`recoup jobs list --state failed`): scheduled
    again now with a fresh budget of attempts, its run log kept. Refused (exit 1) unless it
    failed."""
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    with opened_jobs(place) as jobs:
        job = jobs.redrive(job_id)
    if json:
        print_json(job_json(job))
    else:
        typer.echo(
            f"job {job.id}: {job.state.value} again, attempts {job.attempts}/"
            f"{job.retry.max_attempts}"
        )


@jobs_app.command("redrive")
def redrive_jobs(
    tenant: TenantOption = None,
    group: Annotated[str | None, typer.Option(help="Failed jobs of exactly this group.")] = None,
    name_prefix: Annotated[
        str | None, typer.Option(help="Failed jobs whose name starts with this (literally).")
    ] = None,
    since: Annotated[
        str | None, typer.Option(metavar="ISO", help="Failed at or after this instant.")
    ] = None,
    until: Annotated[str | None, typer.Option(metavar="ISO", help="Failed before this.")] = None,
    error: Annotated[
        str | None, typer.Option(help="Whose last error contains this (case-sensitive).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count them; redrive none.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Redrive without asking.")] = False,
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    json: JsonOption = False,
) -> None:
    """Redrive the failed jobs a filter names, counted first: each scheduled again now with
    the budget of attempts it was created with. Asks before redriving unless --yes."""
    from recoup.jobs.redrive import FailedFilter

    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    spelling = {"group": "--group", "name_prefix": "--name-prefix", "error": "--error"}
    spelling |= {"since": "--since", "until": "--until"}
    window = {
        "since": None if since is None else parse_instant("--since", since),
        "until": None if until is None else parse_instant("--until", until),
    }
    with opened_jobs(place) as jobs:
        with spelled_as_typed(spelling):
            found = FailedFilter(
                tenant=jobs.tenant, group=group, name_prefix=name_prefix, error=error, **window
            )
        counted = jobs.redrive_failed(found, dry_run=True)
        outcome = counted if dry_run else None
        if not dry_run and counted.matched:
            if not yes and not typer.confirm(
                f"redrive {counted.matched} failed job(s) of {jobs.tenant}?", err=True
            ):
                fail("nothing redriven", code=1)
            outcome = jobs.redrive_failed(found, dry_run=False)
    if outcome is None:  # nothing matched: nothing to redrive
        outcome = counted.model_copy(update={"dry_run": False})
    if json:
        print_json(outcome.model_dump(mode="json"))
    elif outcome.dry_run:
        typer.echo(f"{outcome.matched} failed job(s) match; none redriven (dry run)")
    else:
        typer.echo(f"{outcome.redriven} of {outcome.matched} failed job(s) redriven")


def _find(jobs: Jobs, job_id: str | None, name: str | None) -> JobOut:
    if name is not None:
        return jobs.get_by_name(name)
    assert job_id is not None
    return jobs.get(job_id)


def _print_next(cursor: str | None) -> None:
    if cursor is not None:
        typer.echo(f"more: --cursor {cursor}")


def _print_jobs(jobs: list[JobOut], title: str) -> None:
    from rich.table import Table

    from recoup.cli._output import console

    table = Table(title=f"{title} ({len(jobs)})", title_justify="left")
    for column in ("id", "name", "state", "run at (UTC)", "attempts", "group"):
        table.add_column(column)
    for job in jobs:
        table.add_row(
            *shown_row(
                job.id,
                job.name or "",
                job.state.value,
                instant(job.run_at),
                f"{job.attempts}/{job.retry.max_attempts}",
                job.group or "",
            )
        )
    console().print(table)


def _print_job(job: JobOut) -> None:
    from rich.table import Table

    from recoup.cli._output import console

    table = Table(title=f"Job {job.id}", title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    rows = [
        ("name", job.name or ""),
        ("state", job.state.value),
        ("run at (UTC)", instant(job.run_at) or ""),
        ("target", target_text(job.target)),
        ("attempts", f"{job.attempts}/{job.retry.max_attempts}"),
        ("last error", job.last_error or ""),
        ("schedule", job.schedule_id or ""),
        ("group", job.group or ""),
        ("created (UTC)", instant(job.created_at) or ""),
        ("finished (UTC)", instant(job.finished_at) or ""),
    ]
    for field, value in rows:
        table.add_row(*shown_row(field, value))
    console().print(table)


def _print_runs(runs: list[RunOut], title: str) -> None:
    from rich.table import Table

    from recoup.cli._output import console

    table = Table(title=f"{title} ({len(runs)})", title_justify="left")
    for column in ("attempt", "started (UTC)", "outcome", "status", "ms", "error"):
        table.add_column(column)
    for run in runs:
        table.add_row(
            *shown_row(
                str(run.attempt),
                instant(run.started_at),
                run.outcome,
                "" if run.status_code is None else str(run.status_code),
                f"{run.duration_ms:.0f}",
                run.error or "",
            )
        )
    console().print(table)
