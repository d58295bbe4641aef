"""`recoup report`: the recovery report of a tenant's invoices, read from its database.

Contract:

    recoup report [--db URL|PATH] [--schema S] [--tenant default] [--since ISO] [--until ISO]
        [--min-volume N] [--now ISO] [--json] [--html FILE] [--attempts FILE]
        → the report's tables on the terminal; `--json`: the report as JSON (what
          GET /v1/dunning/report answers); `--html FILE`: one self-contained page with charts
          written to FILE, whose path is printed (the `plot` extra draws the charts);
          `--attempts FILE`: the attempt log behind it as CSV (one row per attempt with its
          inputs: instant, local hour and weekday, outcome, decline codes, gateway, merchant
          id, policy, amount, cohort), whose path is printed

    recoup report --evaluate POLICY [the window's options] [--json]
        → a candidate policy (a preset's name or a TOML file) estimated from the window's
          logged timing decisions (`analytics.policy_evaluation`: self-normalised inverse
          propensity with its interval), beside the logged policy's observed recovery, and
          why the log cannot support the estimate when it cannot (no exploration, too few
          overlapping decisions); `--json`: {"since", "until", "candidate", "invoices",
          "decisions", "exploring_decisions", "overlapping", "observed", "estimate",
          "supported", "reasons"}. A bad policy: one line naming --evaluate, exit 2

The report covers the invoices whose failure is in [since, until): `--until` defaults to now,
`--since` to as far back as the report's judgements look (150 days with the defaults). `--now`
(default: the system clock) is what counts as still running and where the judging windows
end; give it for a database filled on a test clock (`recoup demo`). Bad input: one line naming
the option, exit 2.

With `--url URL --token T` (or RECOUP_URL, RECOUP_TOKEN) instead of `--db`, a remote `recoup
serve` builds the report of the token's tenant (GET /v1/dunning/report) on its own clock:
the same tables, `--json` the same document, `--html FILE` its page; `--now` and `--attempts`
need the database.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from recoup.cli._app import JsonOption, SchemaOption, app, fail, print_json
from recoup.cli._where import (
    DbOption,
    TenantOption,
    TokenOption,
    UrlOption,
    Where,
    opened_client,
    opened_store,
    where,
)
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import parse_instant


def _instant(option: str, text: str | None) -> Any:
    return None if text is None else parse_instant(option, text)


@app.command("report")
def report(
    db: DbOption = None,
    schema: SchemaOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    tenant: TenantOption = None,
    since: Annotated[
        str | None,
        typer.Option(metavar="ISO", help="Earliest failure (default: as far back as needed)."),
    ] = None,
    until: Annotated[
        str | None, typer.Option(metavar="ISO", help="Failures before this (default: now).")
    ] = None,
    min_volume: Annotated[
        int | None,
        typer.Option(min=1, help="Buckets below this count say insufficient data (30)."),
    ] = None,
    now: Annotated[
        str | None,
        typer.Option(metavar="ISO", help="The report as of this instant (default: the clock)."),
    ] = None,
    json: JsonOption = False,
    html: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Write the report as an HTML page.")
    ] = None,
    attempts: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Write the attempt log behind the report as CSV."),
    ] = None,
    evaluate: Annotated[
        str | None,
        typer.Option(
            metavar="POLICY",
            help="Estimate this policy's recovery (a preset or a TOML file) from the logged "
            "timing decisions, before turning it on.",
        ),
    ] = None,
) -> None:
    """The recovery report: rates with intervals by attempt, hour, weekday, decline code,
    gateway, merchant id and cohort; spikes, the review queue, load shape, double charges and
    the policy experiment."""
    window = {"since": _instant("--since", since), "until": _instant("--until", until)}
    as_of = _instant("--now", now)
    place = where(db=db, schema=schema, tenant=tenant, url=url, token=token)
    if place.remote:
        if evaluate is not None:
            raise InvalidInput("--evaluate", evaluate, "evaluated against a local --db only")
        _remote_report(place, window, min_volume, now=now, json=json, html=html, log=attempts)
        return
    from recoup.recovery.reporting import Reports
    from recoup.timekeeping.clock import SystemClock

    if evaluate is not None:
        from recoup.cli._policy import load_policy

        candidate = load_policy(evaluate, option="--evaluate").policy
        with opened_store(place) as (store, tenant_id):
            reports = Reports(store, SystemClock())
            span = reports.window(reports.options(tenant_id, now=as_of), **window)
            found = reports.evaluate(tenant_id, candidate, span)
        _print_evaluation(found, span, json)
        return
    with opened_store(place) as (store, tenant_id):
        reports = Reports(store, SystemClock())
        built, span = reports.build(tenant_id, min_volume=min_volume, now=as_of, **window)
        log = reports.attempt_log(tenant_id, span) if attempts is not None else []
        money = reports.money(tenant_id, span) if json else {}
    if attempts is not None:
        _write_attempts(log, attempts)
    if html is not None:
        _write_html(built, html)
    if json:
        from recoup.analytics.recovery import report_json

        window_json = {"since": span.since.isoformat(), "until": span.until.isoformat()}
        print_json(window_json | report_json(built) | {"amounts": money})
    elif html is not None or attempts is not None:
        for path in (html, attempts):
            if path is not None:
                typer.echo(str(path))
    else:
        _print_report(tenant_id, span.since, span.until, built)


def _print_report(tenant: str, since: datetime, until: datetime, built: Any) -> None:
    from rich.console import Console

    from recoup.analytics.recovery import render_terminal

    console = Console()
    console.print(
        f"Recovery report of {tenant}: failures in [{since:%Y-%m-%d %H:%M}, "
        f"{until:%Y-%m-%d %H:%M}) UTC, as of {built.options.now:%Y-%m-%d %H:%M} UTC"
    )
    render_terminal(built, console)


def _remote_report(
    place: Where,
    window: dict[str, Any],
    min_volume: int | None,
    *,
    now: str | None,
    json: bool,
    html: Path | None,
    log: Path | None,
) -> None:
    """The report of a remote server (GET /v1/dunning/report): its JSON, its HTML page
    written to `html`, or its tables (read back from the JSON). The server's clock is the
    report's now, and it serves no attempt log."""
    if now is not None:
        raise InvalidInput("--now", now, "the server's clock is the report's now with --url")
    if log is not None:
        raise InvalidInput("--attempts", str(log), "a database's attempt log: --db, not --url")
    with opened_client(place) as (client, tenant):
        tables = not json and html is None
        wanted = json or tables
        document = client.recovery_report(min_volume=min_volume, **window) if wanted else None
        page = client.recovery_report_html(min_volume=min_volume, **window) if html else None
    if tables and document is not None:
        from recoup.analytics.recovery.json_reading import report_from_json

        since, until = (datetime.fromisoformat(document[end]) for end in ("since", "until"))
        _print_report(tenant, since, until, report_from_json(document))
        return
    if page is not None and html is not None:
        try:
            html.write_text(page, encoding="utf-8")
        except OSError as exc:
            fail(f"--html {html}: cannot write ({exc.strerror})")
    if document is not None:
        print_json(document)
    elif html is not None:
        typer.echo(str(html))


def _evaluation_json(found: Any, span: Any) -> dict[str, Any]:
    observed = found.observed
    estimate = found.estimate
    return {
        "since": span.since.isoformat(),
        "until": span.until.isoformat(),
        "candidate": found.candidate,
        "invoices": found.invoices,
        "decisions": found.decisions,
        "exploring_decisions": found.exploring_decisions,
        "overlapping": found.overlapping,
        "observed": None
        if observed is None
        else {
            "recovered": found.observed_recovered,
            "rate": round(found.observed_recovered / found.invoices, 4),
            "low": round(observed.low, 4),
            "high": round(observed.high, 4),
        },
        "estimate": None
        if estimate is None
        else {
            "rate": round(estimate.value, 4),
            "low": round(estimate.low, 4),
            "high": round(estimate.high, 4),
            "effective_invoices": round(estimate.effective_invoices, 1),
            "method": estimate.method,
        },
        "supported": found.supported,
        "reasons": list(found.reasons),
    }


def _print_evaluation(found: Any, span: Any, as_json: bool) -> None:
    row = _evaluation_json(found, span)
    if as_json:
        print_json(row)
        return
    say = typer.echo
    say(
        f"Candidate policy {found.candidate}, estimated from the logged timing decisions of "
        f"failures in [{span.since:%Y-%m-%d}, {span.until:%Y-%m-%d}): {found.invoices:,} "
        f"invoices, {found.decisions:,} decisions "
        f"({found.exploring_decisions:,} with a propensity below 1)"
    )
    if (observed := row["observed"]) is not None:
        say(
            f"  logged policy, observed: {100 * observed['rate']:.1f}% recovered "
            f"[{100 * observed['low']:.1f}, {100 * observed['high']:.1f}]"
        )
    if (estimate := row["estimate"]) is not None:
        say(
            f"  candidate, estimated:    {100 * estimate['rate']:.1f}% recovered "
            f"[{100 * estimate['low']:.1f}, {100 * estimate['high']:.1f}] "
            f"(95%, {estimate['method']}; {found.overlapping:,} overlapping invoices, "
            f"effective {estimate['effective_invoices']:.0f})"
        )
    else:
        say("  candidate, estimated:    none (no logged invoice is one it could have produced)")
    for reason in found.reasons:
        say(f"  the log cannot support this estimate: {reason}")


def _write_attempts(log: list[Any], path: Path) -> None:
    import csv
    import dataclasses

    from recoup.analytics.recovery import AttemptLogEntry

    columns = [f.name for f in dataclasses.fields(AttemptLogEntry)]
    try:
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(columns)
            for entry in log:
                row = [getattr(entry, name) for name in columns]
                writer.writerow(["" if v is None else _cell(v) for v in row])
    except OSError as exc:
        fail(f"--attempts {path}: cannot write ({exc.strerror})")


def _cell(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _write_html(built: Any, path: Path) -> None:
    from recoup.analytics.recovery import render_html

    try:
        page = render_html(built)
    except ModuleNotFoundError as exc:
        fail(f"recoup report --html needs {exc.name}: pip install 'recoup[plot]'")
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        fail(f"--html {path}: cannot write ({exc.strerror})")
