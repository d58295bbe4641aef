"""Pages that refresh themselves while work is running: a job that runs or is due within the
minute, an invoice whose attempt is being asked or is about to be. The page carries a
`<meta http-equiv="refresh">` (short polling without a line of script, so the dashboard's
Content-Security-Policy, `default-src 'none'`, stays as it is) pointing at the same page
without its one-off notice, and a link that stops it (`live=off`, kept while one browses the
page, for typing a reason without the page reloading under it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode

from fastapi import Request

from recoup.dunning.invoice import AttemptState, Invoice
from recoup.errors import InvalidInput
from recoup.jobs.model import Job, JobState

REFRESH_SECONDS = 5  # between two loads of a page with running work
SOON = timedelta(minutes=1)  # work due this soon counts as running
_ONE_OFF = frozenset({"notice", "why", "live"})  # what a refresh leaves out of the address


@dataclass(frozen=True, kw_only=True)
class Refresh:
    """What a page says of its refreshing: every `seconds` to `url`, or paused (`seconds` 0)
    with `url` the page that resumes it."""

    seconds: int
    url: str
    pause_url: str


def jobs_running(jobs: Iterable[Job], *, now: datetime) -> bool:
    return any(
        job.state is JobState.RUNNING
        or (job.state is JobState.SCHEDULED and job.run_at <= now + SOON)
        for job in jobs
    )


def invoices_running(invoices: Iterable[Invoice], *, now: datetime) -> bool:
    return any(
        not invoice.state.is_final
        and any(
            a.state is AttemptState.PENDING
            or (a.state is AttemptState.SCHEDULED and a.at <= now + SOON)
            for a in invoice.attempts
        )
        for invoice in invoices
    )


def refresh(request: Request, live: str | None, running: bool) -> Refresh | None:
    """How the page refreshes: None when nothing runs; paused with `live=off`."""
    if live not in (None, "", "on", "off"):
        raise InvalidInput("live", live, "expected on or off")
    if not running:
        return None
    kept = [(k, v) for k, v in request.query_params.multi_items() if k not in _ONE_OFF]
    url = request.url.path + (f"?{urlencode(kept)}" if kept else "")
    paused = request.url.path + "?" + urlencode([*kept, ("live", "off")])
    if live == "off":
        return Refresh(seconds=0, url=url, pause_url=paused)
    return Refresh(seconds=REFRESH_SECONDS, url=url, pause_url=paused)


__all__ = ["REFRESH_SECONDS", "SOON", "Refresh", "invoices_running", "jobs_running", "refresh"]
