"""Standard 5-field cron expressions evaluated in an IANA time zone, on top of `cronsim`.

The DST rule is Debian's (cron(8), "Daylight Saving Time and other time changes"):

- An expression with a fixed minute **and** a fixed hour (neither field starts with `*`) is a
  "fixed-time" job. Inside a spring-forward gap it runs once, right after the gap
  (`30 2 * * *` in America/New_York on 2026-03-08 runs at 03:00 EDT); inside a fall-back fold
  it runs once, at the first instant (`30 1 * * *` on 2026-11-01 runs at 01:30 EDT only).
- An expression with a wildcard in the minute or the hour field follows the clock: times
  skipped by a gap do not run, and a fold runs in real time (`*/30 * * * *` on 2026-11-01 runs
  at 01:00 EDT, 01:30 EDT, 01:00 EST, 01:30 EST).
- Debian treats a jump of more than 3 hours as a clock correction, not DST, and does not make
  up the skipped runs; so a gap longer than `MAX_DST_GAP` (Pacific/Apia skipping 2011-12-30)
  gets no catch-up run.

cronsim implements the first two (it iterates fixed-time expressions in naive wall time). Two
things are added here: results are never at or before the `after` instant (cronsim, restarted
from a reading in the second half of a fold, returns the fold's first instant, which has already
passed), and the 3-hour rule above. Day-of-month and day-of-week follow Debian too: when either
starts with `*` both must match, otherwise either may. cronsim's extensions `L`, `LW`, `W#n` and
`WL` are accepted; `@hourly`, `@daily`, `@midnight`, `@weekly`, `@monthly`, `@yearly` and
`@annually` stand for their usual expansions. Expressions with a seconds field are refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from recoup.errors import InvalidInput
from recoup.timekeeping.instants import require_aware
from recoup.timekeeping.zones import zone

# cron(8): "If time was adjusted one hour forward, those jobs that would have run in the interval
# that has been skipped will be run soon after the change. ... Clock changes of more than 3 hours
# are considered to be corrections to the clock or timezone, and the new time is used
# immediately."
MAX_DST_GAP: Final = timedelta(hours=3)

ALIASES: Final = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

# The fields in order, with how many values each has: a step (`*/15`) is at most that many,
# as a larger one can only ever match the range's first value and is a typo (`*/99999999`).
_FIELDS: Final = (
    ("minute", 60),
    ("hour", 24),
    ("day-of-month", 31),
    ("month", 12),
    ("day-of-week", 7),
)

_EXPECTED: Final = (
    "expected 5 fields 'minute hour day-of-month month day-of-week' such as '0 9 * * 1-5', "
    "or one of " + ", ".join(ALIASES)
)


def validate_cron(expression: str, *, field: str = "cron") -> str:
    """The expression in canonical form (aliases expanded, single spaces, upper case), or
    `InvalidInput(field, expression, …)` saying what is wrong."""
    if not isinstance(expression, str):
        raise InvalidInput(field, expression, _EXPECTED)
    text = " ".join(expression.split())
    text = ALIASES.get(text.lower(), text).upper()
    if len(text.split()) != 5:
        raise InvalidInput(field, expression, _EXPECTED)
    _check_steps(field, expression, text)
    try:
        CronSim(text, datetime(2000, 1, 1))
    except CronSimError as exc:
        raise InvalidInput(field, expression, f"{str(exc).lower()} field; {_EXPECTED}") from None
    except ValueError:  # a number of thousands of digits, past what int() will read
        raise InvalidInput(field, expression, _EXPECTED) from None
    return text


def _check_steps(field: str, expression: str, text: str) -> None:
    """`InvalidInput` for a step that is not a number from 1 to its field's count of values."""
    for (name, values), part in zip(_FIELDS, text.split(), strict=True):
        for item in part.split(","):
            _, slash, step = item.partition("/")
            if not slash:
                continue
            if not (step.isdigit() and len(step) <= 3 and 1 <= int(step) <= values):
                raise InvalidInput(
                    field,
                    expression,
                    f"expected a step of 1–{values} in the {name} field (found /{step[:20]})",
                )


def follows_clock(expression: str) -> bool:
    """True when the minute or the hour field starts with `*` (Debian's wildcard jobs, which
    run by the clock through DST changes); False for fixed-time jobs."""
    return _wildcard_time(validate_cron(expression))


def iter_cron(expression: str, timezone: str | ZoneInfo, after: datetime) -> Iterator[datetime]:
    """The expression's instants strictly after `after`, in UTC, strictly increasing.

    Ends if the expression stops matching (cronsim gives up after 50 years without a match:
    `0 0 31 2 *` is refused up front; `0 0 * 2 MON#5` is merely rare) or when the next match
    would fall past what `datetime` holds (year 9999). An `after` whose local reading in
    `timezone` datetime cannot hold (within hours of year 1) is `InvalidInput`.
    """
    text = validate_cron(expression)
    tz = zone(timezone) if isinstance(timezone, str) else timezone
    last = require_aware("after", after).astimezone(UTC)
    try:
        start = last.astimezone(tz)
    except OverflowError:
        if last.year > 1:
            return  # past the last local instant datetime holds: nothing comes after
        raise InvalidInput(
            "after", last.isoformat(), f"expected an instant datetime can hold in {tz}"
        ) from None
    sim = CronSim(text, start)
    fixed_time = not _wildcard_time(text)
    while True:
        try:
            at: datetime = next(sim).astimezone(UTC)
        except (StopIteration, OverflowError):  # no match within 50 years, or past year 9999
            return
        if at <= last:
            # cronsim walks fixed-time expressions in naive wall time; restarted from the second
            # reading of a fold it yields the fold's first instant, which has already passed.
            continue
        try:
            catch_up = fixed_time and _is_correction_catch_up(sim, at, tz)
        except OverflowError:  # a second before `at` is before year 1 in `tz`
            catch_up = False
        if catch_up:
            continue
        last = at
        yield at


def cron_next(expression: str, timezone: str | ZoneInfo, after: datetime) -> datetime | None:
    """The first instant strictly after `after` (aware) at which the expression fires in
    `timezone`, in UTC; None if it never fires again."""
    return next(iter_cron(expression, timezone, after), None)


def cron_between(
    expression: str, timezone: str | ZoneInfo, start: datetime, end: datetime
) -> list[datetime]:
    """The UTC instants at or after `start` and strictly before `end` (half-open)."""
    start_utc = require_aware("start", start).astimezone(UTC)
    end_utc = require_aware("end", end).astimezone(UTC)
    found: list[datetime] = []
    for at in iter_cron(expression, timezone, start_utc - timedelta(microseconds=1)):
        if at >= end_utc:
            break
        found.append(at)
    return found


def _wildcard_time(text: str) -> bool:
    minute, hour = text.split()[:2]
    return minute.startswith("*") or hour.startswith("*")


def _is_correction_catch_up(sim: CronSim, at: datetime, tz: ZoneInfo) -> bool:
    """True for a run cronsim moved out of a gap longer than `MAX_DST_GAP`.

    A catch-up run is one whose local wall time the expression does not match; it sits at the
    end of the gap, so the offset change just before it is the gap's length.
    """
    local = at.astimezone(tz)
    matches = (
        local.minute in sim.minutes
        and local.hour in sim.hours
        and local.month in sim.months
        and bool(sim.match_day(local.date()))
    )
    if matches:
        return False
    before = (at - timedelta(seconds=1)).astimezone(tz).utcoffset()
    after = local.utcoffset()
    if before is None or after is None:  # pragma: no cover - zoneinfo always has offsets
        return False
    return after - before > MAX_DST_GAP


__all__ = [
    "ALIASES",
    "MAX_DST_GAP",
    "cron_between",
    "cron_next",
    "follows_clock",
    "iter_cron",
    "validate_cron",
]
