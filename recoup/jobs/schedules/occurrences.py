"""Recurring schedules: occurrences of a stored rule, and their materialisation as jobs.

Each occurrence becomes an ordinary job named `{schedule}@{occurrence instant, ISO UTC}`
(`nightly@2026-03-08T07:30:00Z`), inserted together with the schedule's advance by
`ScheduleStore.advance_schedule`, a compare-and-set on `next_fire_at`: two materialisers
(two workers) can never create the same occurrence twice, and the unique
(schedule_id, occurrence_at) of jobs is the backstop (`occurrence_at` is the job's first
run_at and never changes, so retries and rescues that move run_at cannot collide).

Occurrences come from the time core and are never derived from "when the job happened to run":
cron via `recoup.timekeeping.cron` (Debian's DST rule), billing anchors via
`recoup.timekeeping.recurrence` (occurrence n from the anchor and n).

**Missed occurrences.** An occurrence more than `MISSED_GRACE` in the past when the
materialiser reaches it (the workers were down) is *missed*; the schedule's policy decides:
`skip` drops them all, `run_once` runs only the latest, `run_all` runs every one (in chunks of
`MAX_JOBS_PER_ADVANCE`). An occurrence late by less than the grace is simply run late.
Pausing skips what falls due during the pause: resuming starts from the next occurrence.

**The window.** A schedule's optional `start_at` and `end_at` bound its occurrences, both
inclusive: none before `start_at`, none after `end_at`. Every next occurrence is taken inside
the window (`next_in_window`); once none is left, `next_fire_at` becomes None and the schedule
is `ended` (it fires nothing more, paused or not).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from recoup.errors import InvalidInput
from recoup.jobs.model import NewJob, check_printable
from recoup.jobs.schedules.model import CronRule, MissedPolicy, Rule, Schedule, check_window
from recoup.jobs.store import ScheduleStore
from recoup.timekeeping.cron import cron_next, iter_cron, validate_cron
from recoup.timekeeping.instants import format_utc, to_utc
from recoup.timekeeping.recurrence import (
    SeriesEnded,
    anchor_from,
    first_after,
    iter_occurrences,
)
from recoup.timekeeping.zones import zone

SCHEDULE_HORIZON = timedelta(minutes=1)  # materialise occurrences due within this much
MISSED_GRACE = timedelta(minutes=1)  # later than this, an occurrence counts as missed
MAX_JOBS_PER_ADVANCE = 500  # occurrences materialised by one advance (one transaction)
MAX_SCHEDULES_PER_PASS = 200  # due schedules fetched per store call
MAX_RUN_ONCE_SCAN = 1_000_000  # occurrences walked to find the latest missed one
MAX_SCHEDULE_NAME = 150  # characters; leaves room for "@" and the instant in a job name
ONE_MICROSECOND = timedelta(microseconds=1)  # the resolution of stored instants


def validate_rule(rule: Rule) -> Rule:
    """The rule checked (and a cron expression canonicalised); `InvalidInput` naming the
    field otherwise."""
    if isinstance(rule, CronRule):
        zone(rule.timezone, field="rule.timezone")
        expression = validate_cron(rule.expression, field="rule.expression")
        return CronRule(expression=expression, timezone=rule.timezone)
    try:
        anchor_from(rule)
    except InvalidInput as exc:
        raise InvalidInput(f"rule.{exc.field}", exc.value, exc.allowed) from None
    return rule


def validate_schedule_name(name: str) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_SCHEDULE_NAME:
        raise InvalidInput("name", name, f"expected 1–{MAX_SCHEDULE_NAME} characters")
    if "@" in name:
        raise InvalidInput("name", name, "expected no '@' (it separates name and instant)")
    check_printable("name", name)
    return name


def next_after(rule: Rule, instant: datetime) -> datetime | None:
    """The rule's first occurrence strictly after `instant` (UTC), or None if it has ended."""
    if isinstance(rule, CronRule):
        return cron_next(rule.expression, rule.timezone, instant)
    try:
        return first_after(anchor_from(rule), instant).at
    except SeriesEnded:  # the next renewal would fall past year 9999
        return None


def next_in_window(
    rule: Rule,
    instant: datetime,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> datetime | None:
    """The rule's first occurrence strictly after `instant` and inside the window (at or after
    `start_at`, at or before `end_at`), or None if there is none."""
    check_window(start_at, end_at)
    after = instant
    if start_at is not None and start_at - ONE_MICROSECOND > after:
        after = start_at - ONE_MICROSECOND  # start_at itself may be an occurrence
    found = next_after(rule, after)
    if found is None or (end_at is not None and found > end_at):
        return None
    return found


def iter_after(rule: Rule, instant: datetime) -> Iterator[datetime]:
    """The rule's occurrences strictly after `instant`, in order."""
    if isinstance(rule, CronRule):
        yield from iter_cron(rule.expression, rule.timezone, instant)
        return
    anchor = anchor_from(rule)
    try:
        first = first_after(anchor, instant)
    except SeriesEnded:  # no renewal before year 9999 ends: the series is over
        return
    for occ in iter_occurrences(anchor, first.n):
        yield occ.at


def upcoming(
    rule: Rule,
    after: datetime,
    count: int,
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> list[datetime]:
    """The next `count` occurrences strictly after `after` inside the window; fewer when the
    series or the window ends first (an anchor's renewals end at the last one before year 9999
    is over)."""
    found: list[datetime] = []
    if count <= 0:
        return found
    after = to_utc("after", after)
    if start_at is not None and start_at - ONE_MICROSECOND > after:
        after = start_at - ONE_MICROSECOND
    for at in iter_after(rule, after):
        if end_at is not None and at > end_at:
            break
        found.append(at)
        if len(found) >= count:
            break
    return found


def occurrence_name(schedule_name: str, at: datetime) -> str:
    """`{schedule}@{instant}`: the deterministic job name of an occurrence."""
    return f"{schedule_name}@{format_utc(at)}"


def occurrence_job(schedule: Schedule, at: datetime) -> NewJob:
    return NewJob(
        run_at=at,
        target=schedule.target,
        tenant=schedule.tenant,
        name=occurrence_name(schedule.name, at),
        payload=schedule.payload,
        retry=schedule.retry,
        timeout=schedule.timeout,
        schedule_id=schedule.id,
        metadata=dict(schedule.metadata),
        trace=schedule.trace,
        **({} if schedule.flow is None else schedule.flow.job_fields()),
    )


@dataclass(frozen=True, kw_only=True)
class Advance:
    """One step of a schedule: the jobs to insert and the new `next_fire_at`."""

    jobs: list[NewJob]
    new_next: datetime | None
    skipped: int = 0  # missed occurrences dropped by the policy (a lower bound for run_once)


def plan_advance(
    schedule: Schedule,
    *,
    now: datetime,
    horizon: timedelta = SCHEDULE_HORIZON,
    grace: timedelta = MISSED_GRACE,
    limit: int = MAX_JOBS_PER_ADVANCE,
) -> Advance | None:
    """What materialising `schedule` at `now` means: occurrences from its `next_fire_at` up to
    `now + horizon`, after applying the missed-occurrence policy to those older than
    `now - grace`. None when there is nothing to do. Pure."""
    start = schedule.next_fire_at
    if start is None or schedule.paused or schedule.deleted:
        return None
    rule = schedule.rule
    window_end = schedule.end_at
    cutoff = now - grace
    end = now + horizon
    if start > end:
        return None
    if window_end is not None and start > window_end:
        return Advance(jobs=[], new_next=None)  # the window closed before this occurrence

    def following(instant: datetime) -> datetime | None:
        return next_in_window(rule, instant, schedule.start_at, window_end)

    jobs: list[NewJob] = []
    skipped = 0
    at: datetime | None = start
    if at is not None and at < cutoff:
        if schedule.missed is MissedPolicy.RUN_ALL:
            while at is not None and at < cutoff:
                if len(jobs) >= limit:
                    return Advance(jobs=jobs, new_next=at)
                jobs.append(occurrence_job(schedule, at))
                at = following(at)
        elif schedule.missed is MissedPolicy.RUN_ONCE:
            latest, skipped, at = _latest_before(rule, at, cutoff, window_end)
            jobs.append(occurrence_job(schedule, latest))
        else:
            at = following(cutoff - ONE_MICROSECOND)
            skipped = 1
    while at is not None and at <= end and len(jobs) < limit:
        jobs.append(occurrence_job(schedule, at))
        at = following(at)
    if not jobs and at == start:
        return None
    return Advance(jobs=jobs, new_next=at, skipped=skipped)


def _latest_before(
    rule: Rule, start: datetime, cutoff: datetime, window_end: datetime | None = None
) -> tuple[datetime, int, datetime | None]:
    """(the latest occurrence before `cutoff` from `start` on (no later than `window_end`),
    how many earlier ones it replaces, the first occurrence at or after `cutoff` inside the
    window)."""
    latest = start
    skipped = 0
    for steps, at in enumerate(iter_after(rule, start)):
        if window_end is not None and at > window_end:
            return latest, skipped, None
        if at >= cutoff or steps >= MAX_RUN_ONCE_SCAN:
            following = at if at >= cutoff else next_in_window(rule, cutoff, None, window_end)
            return latest, skipped, following
        latest = at
        skipped += 1
    return latest, skipped, None


def materialise_one(
    store: ScheduleStore,
    schedule: Schedule,
    *,
    now: datetime,
    horizon: timedelta = SCHEDULE_HORIZON,
    grace: timedelta = MISSED_GRACE,
) -> int | None:
    """Advance one schedule once (see `plan_advance`): the number of jobs created by the
    advance, or None when nothing was advanced (nothing due, or another materialiser advanced
    it first). Blocking."""
    plan = plan_advance(schedule, now=now, horizon=horizon, grace=grace)
    if plan is None or schedule.next_fire_at is None:
        return None
    advanced = store.advance_schedule(
        schedule.id,
        expected_next=schedule.next_fire_at,
        revision=schedule.revision,
        new_next=plan.new_next,
        jobs=plan.jobs,
        now=now,
    )
    return len(plan.jobs) if advanced else None


def materialise(
    store: ScheduleStore,
    *,
    now: datetime,
    horizon: timedelta = SCHEDULE_HORIZON,
    grace: timedelta = MISSED_GRACE,
    max_passes: int = 100,
) -> int:
    """Turn every due schedule occurrence (up to `now + horizon`) into jobs, through
    `store.advance_schedule`. Returns the number of jobs created (as far
    as this materialiser knows: an advance another one won is not counted). Blocking."""
    created = 0
    for _ in range(max_passes):
        due = store.due_schedules(now=now, horizon=horizon, limit=MAX_SCHEDULES_PER_PASS)
        progressed = False
        for schedule in due:
            count = materialise_one(store, schedule, now=now, horizon=horizon, grace=grace)
            if count is not None:
                created += count
                progressed = True
        if not progressed or len(due) == 0:
            break
    return created


__all__ = [
    "MAX_JOBS_PER_ADVANCE",
    "MISSED_GRACE",
    "SCHEDULE_HORIZON",
    "Advance",
    "iter_after",
    "materialise",
    "materialise_one",
    "next_after",
    "next_in_window",
    "occurrence_job",
    "occurrence_name",
    "plan_advance",
    "upcoming",
    "validate_rule",
    "validate_schedule_name",
]
