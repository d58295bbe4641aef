"""Planning every failure of a replay in bulk, with numpy, exactly as `plan_retries` would.

Row for row, the result is what `plan_retries` gives for that failure with no card history (a
CSV has no card column): the same decision kind and the same attempts to the second. It gets
there in bulk rather than per invoice:

- rows are grouped by (customer zone, business calendar); decline codes are classified once per
  distinct (decline code, advice codes) pair;
- local dates come from UTC instants through `recoup.timekeeping.bulk.ZoneOffsets` (offsets
  computed once per distinct UTC day), then integer arithmetic;
- business-day steps are `numpy.busday_offset` with the calendar's weekmask and holidays;
- the window's wall time is turned back into UTC by the same `ZoneOffsets`, once per distinct
  (zone, date); dates whose window crosses a DST change fall back to `resolve_local` row by
  row, so the DST rule is exactly the planner's;
- jitter is `recoup.dunning.jitter`, the planner's own function, over whole arrays;
- with `paydays` in the policy, insufficient-funds rows of a country with paydays are planned
  by `plan_retries` itself, row by row (`_payday_rows`): few rows, and the payday search is
  the planner's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import numpy as np
import numpy.typing as npt

from recoup.analytics.replay._units import DAY, I64, US, to_us
from recoup.analytics.replay.failures_csv import FailureRows, split_advice
from recoup.dunning.jitter import invoice_seeds, jitter_seconds
from recoup.dunning.landing import customer_calendar, reference_shift_seconds
from recoup.dunning.outcomes import Retry
from recoup.dunning.planner import Failure, plan_retries
from recoup.dunning.policy import DunningPolicy, GapUnit
from recoup.dunning.policy_paydays import is_insufficient_funds
from recoup.dunning.taxonomy import DeclineClass, Taxonomy, classify, default_taxonomy
from recoup.timekeeping.bulk import ZoneOffsets
from recoup.timekeeping.calendar import BusinessCalendar
from recoup.timekeeping.zones import zone

RETRY, NO_RETRY, AWAIT_CUSTOMER = 0, 1, 2
KIND_NAMES = ("retry", "no_retry", "await_customer")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_HOLIDAY_MARGIN = 14  # days of holidays loaded either side of the dates a replay can reach


@dataclass(frozen=True)
class ReplayResult:
    """Per row, `kind` (RETRY, NO_RETRY, AWAIT_CUSTOMER); per attempt, sorted by row then
    attempt: the row it belongs to, its number, its UTC instant (Unix seconds) and the UTC offset
    of its local reading (seconds east)."""

    rows: FailureRows
    kind: npt.NDArray[np.int8]
    attempt_row: I64
    attempt_number: I64
    attempt_at: I64
    attempt_offset: I64
    # Decline codes the taxonomy does not know → rows carrying them (planned as soft, capped).
    unknown_codes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Verdicts:
    kind: npt.NDArray[np.int8]
    count: I64
    min_gap_us: I64
    unknown_codes: dict[str, int]


def _verdicts(rows: FailureRows, policy: DunningPolicy, taxonomy: Taxonomy) -> _Verdicts:
    pairs = rows.decline.astype(np.int64) * max(len(rows.advices), 1) + rows.advice
    uniq, inverse = np.unique(pairs, return_inverse=True)
    kinds, counts, gaps = [], [], []
    width = max(len(rows.advices), 1)
    unknown: set[int] = set()  # indexes into rows.declines
    for pair in uniq.tolist():
        decline, advice = rows.declines[pair // width], rows.advices[pair % width]
        verdict = classify(decline or None, split_advice(advice), taxonomy=taxonomy)
        if decline.strip() and decline.strip() in verdict.unknown:
            unknown.add(pair // width)
        match verdict.decline_class:
            case DeclineClass.SOFT:
                kinds.append(RETRY)
            case DeclineClass.CUSTOMER_ACTION:
                kinds.append(AWAIT_CUSTOMER)
            case DeclineClass.NEVER | DeclineClass.NOT_APPLICABLE:
                kinds.append(NO_RETRY)
        cap = len(policy.gaps)
        counts.append(cap if verdict.max_attempts is None else min(cap, verdict.max_attempts))
        gaps.append(max(policy.min_gap_seconds, verdict.min_delay_hours * 3600) * US)
    return _Verdicts(
        kind=np.array(kinds, dtype=np.int8)[inverse],
        count=np.array(counts, dtype=np.int64)[inverse],
        min_gap_us=np.array(gaps, dtype=np.int64)[inverse],
        unknown_codes=_unknown_counts(rows, unknown),
    )


def _unknown_counts(rows: FailureRows, unknown: set[int]) -> dict[str, int]:
    """Rows per unknown decline code, most frequent first (then by code)."""
    if not unknown:
        return {}
    per_code = np.bincount(rows.decline, minlength=len(rows.declines))
    found: dict[str, int] = {}
    for c in unknown:
        code = rows.declines[c].strip()
        found[code] = found.get(code, 0) + int(per_code[c])
    return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))


def _busdaycalendar(calendar: BusinessCalendar, first: int, last: int) -> np.busdaycalendar:
    weekmask = "".join("0" if d in calendar.weekend else "1" for d in range(7))
    start = date(1970, 1, 1) + timedelta(days=first - _HOLIDAY_MARGIN)
    end = date(1970, 1, 1) + timedelta(days=last + _HOLIDAY_MARGIN)
    holidays = np.array(calendar.holidays_between(start, end), dtype="datetime64[D]")
    return np.busdaycalendar(weekmask=weekmask, holidays=holidays)


def _step(days: I64, count: int, unit: GapUnit, cal: np.busdaycalendar) -> I64:
    """The planner's `landing_date` over arrays of local dates (days since the epoch)."""
    as_dates = days.astype("datetime64[D]")
    match unit:
        case GapUnit.BUSINESS_DAYS:
            # The n-th business day after d: roll back to a business day, then count n forward.
            moved = np.busday_offset(as_dates, count, roll="backward", busdaycal=cal)
        case GapUnit.DAYS:
            moved = np.busday_offset(as_dates + count, 0, roll="forward", busdaycal=cal)
    return moved.astype(np.int64)


def _next_business_day(days: I64, cal: np.busdaycalendar) -> I64:
    moved = np.busday_offset(days.astype("datetime64[D]"), 1, roll="forward", busdaycal=cal)
    return moved.astype(np.int64)


def _blackout_mask(
    at_us: I64, gateway: npt.NDArray[np.int32], windows: dict[int, list[tuple[int, int]]]
) -> npt.NDArray[np.bool_]:
    hit = np.zeros(at_us.shape, dtype=bool)
    for code, spans in windows.items():
        mine = gateway == code
        for start, end in spans:
            hit |= mine & (at_us >= start) & (at_us < end)
    return hit


def _plan_group(
    offsets: ZoneOffsets,
    cal: np.busdaycalendar,
    policy: DunningPolicy,
    failed_us: I64,
    seeds: npt.NDArray[np.uint64],
    count: I64,
    min_gap_us: I64,
    gateway: npt.NDArray[np.int32],
    blackouts: dict[int, list[tuple[int, int]]],
) -> tuple[I64, I64, I64, I64]:
    """Attempts (member index, number, UTC seconds, offset) of one (zone, calendar) group, by
    the planner's rules (see `recoup.dunning.planner`)."""
    shift = reference_shift_seconds(policy)
    deadline_us = failed_us + policy.max_duration_seconds * US
    failed_off = offsets.at(failed_us // US)
    ref_day = (failed_us + (failed_off + shift) * US) // (DAY * US)
    ref_us = failed_us.copy()
    alive = count >= 1
    out_member: list[I64] = []
    out_number: list[I64] = []
    out_at: list[I64] = []
    out_off: list[I64] = []
    for k in range(1, int(count.max(initial=0)) + 1):
        members = np.flatnonzero(alive & (count >= k))
        if members.size == 0:
            break
        gap = policy.gaps[k - 1]
        day = _step(ref_day[members], gap.count, gap.unit, cal)
        jitter = jitter_seconds(
            seeds[members], np.full(members.size, k), policy.jitter_span_seconds
        )
        at = np.empty(members.size, dtype=np.int64)
        off = np.empty(members.size, dtype=np.int64)
        pending = np.arange(members.size)
        while pending.size:
            at[pending], off[pending] = offsets.walls_to_utc(day[pending], jitter[pending])
            who = members[pending]
            at_us = at[pending] * US
            late = at_us > deadline_us[who]
            early = at_us < ref_us[who] + min_gap_us[who]
            blocked = (
                _blackout_mask(at_us, gateway[who], blackouts)
                if blackouts
                else np.zeros_like(early)
            )
            move = ~late & (early | blocked)
            pending = pending[move]
            day[pending] = _next_business_day(day[pending], cal)
        kept = at * US <= deadline_us[members]
        alive[members[~kept]] = False
        who, at, off = members[kept], at[kept], off[kept]
        out_member.append(who)
        out_number.append(np.full(who.size, k, dtype=np.int64))
        out_at.append(at)
        out_off.append(off)
        ref_us[who] = at * US
        ref_day[who] = (at + off + shift) // DAY
    empty = np.zeros(0, dtype=np.int64)
    return (
        np.concatenate(out_member) if out_member else empty,
        np.concatenate(out_number) if out_number else empty,
        np.concatenate(out_at) if out_at else empty,
        np.concatenate(out_off) if out_off else empty,
    )


def _payday_rows(rows: FailureRows, policy: DunningPolicy, soft: I64) -> I64:
    """The soft rows whose attempts the policy's paydays may move (insufficient funds, in a
    country with paydays)."""
    if policy.paydays is None or soft.size == 0:
        return np.zeros(0, dtype=np.int64)
    funds = np.array([is_insufficient_funds(d or None) for d in rows.declines] or [False])
    aimed = np.array(
        [bool(policy.paydays.rules_for(c or policy.default_country)) for c in rows.countries]
        or [False]
    )
    keep = funds[rows.decline[soft]] & aimed[rows.country[soft]]
    picked: I64 = soft[keep].astype(np.int64)
    return picked


def _plan_rows(
    rows: FailureRows, policy: DunningPolicy, taxonomy: Taxonomy, picked: I64
) -> tuple[I64, I64, I64, I64]:
    """Attempts (row, number, UTC seconds, offset) of `picked` rows, by `plan_retries`."""
    found: list[tuple[int, int, int, int]] = []
    for i in picked.tolist():
        failure = Failure(
            invoice=rows.invoice[i],
            failed_at=_EPOCH + timedelta(microseconds=int(rows.failed_us[i])),
            timezone=rows.zones[rows.zone[i]],
            country=rows.countries[rows.country[i]] or None,
            decline_code=rows.declines[rows.decline[i]] or None,
            advice_codes=split_advice(rows.advices[rows.advice[i]]),
            gateway=rows.gateways[rows.gateway[i]] or None,
        )
        decision = plan_retries(failure, policy, taxonomy=taxonomy)
        for a in decision.attempts if isinstance(decision, Retry) else ():
            offset = a.local.utcoffset() or timedelta(0)
            found.append((i, a.attempt, int(a.at.timestamp()), int(offset.total_seconds())))
    columns = [np.array(c, dtype=np.int64) for c in zip(*found, strict=True)] if found else []
    empty = np.zeros(0, dtype=np.int64)
    return (
        columns[0] if columns else empty,
        columns[1] if columns else empty,
        columns[2] if columns else empty,
        columns[3] if columns else empty,
    )


def replay_failures(
    rows: FailureRows,
    policy: DunningPolicy,
    *,
    taxonomy: Taxonomy | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Plan every row under `policy`, in bulk; `on_progress(done, total)` is told how many rows
    are planned as groups finish."""
    table = taxonomy or default_taxonomy()
    total = len(rows)
    verdicts = _verdicts(rows, policy, table)
    kind = verdicts.kind.copy()
    soft = np.flatnonzero(kind == RETRY)
    by_planner = _payday_rows(rows, policy, soft)
    soft = np.setdiff1d(soft, by_planner)
    # Only the countries of the rows kept: a skipped row's unknown country (refused when the
    # file was read) must not stop the replay of the others.
    used = set(np.unique(rows.country).tolist())
    calendars = [
        customer_calendar(policy, (c or None) if code in used else None)
        for code, c in enumerate(rows.countries)
    ]
    cal_keys: dict[tuple[frozenset[int], str | None], int] = {}
    cal_code = np.array(
        [cal_keys.setdefault((c.weekend, c.country), len(cal_keys)) for c in calendars] or [0],
        dtype=np.int64,
    )[rows.country]
    blackouts = {
        code: [(to_us(b.start), to_us(b.end)) for b in policy.blackouts_for(name)]
        for code, name in enumerate(rows.gateways)
        if policy.blackouts_for(name)
    }
    seeds = invoice_seeds((rows.invoice[i] for i in soft.tolist()), policy.fingerprint)

    group = rows.zone[soft].astype(np.int64) * max(len(cal_keys), 1) + cal_code[soft]
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    members_all = np.split(order, bounds) if order.size else []
    failed_days = rows.failed_us[soft] // (DAY * US)
    first_day = int(failed_days.min()) - 1 if soft.size else 0
    last_day = int(failed_days.max()) + policy.max_duration_days + 1 if soft.size else 0
    cal_by_key = {v: k for k, v in cal_keys.items()}
    busdays: dict[int, np.busdaycalendar] = {}
    zones: dict[int, ZoneOffsets] = {}
    parts: list[tuple[I64, I64, I64, I64]] = []
    done = total - soft.size
    if by_planner.size:
        parts.append(_plan_rows(rows, policy, table, by_planner))
    if on_progress is not None:
        on_progress(done, total)
    for members in members_all:
        rows_idx = soft[members]
        zone_code = int(rows.zone[rows_idx[0]])
        key = int(cal_code[rows_idx[0]])
        if key not in busdays:
            weekend, country = cal_by_key[key]
            calendar = BusinessCalendar(weekend=weekend, country=country)
            busdays[key] = _busdaycalendar(calendar, first_day, last_day)
        if zone_code not in zones:
            zones[zone_code] = ZoneOffsets(
                zone(rows.zones[zone_code]), policy.window_start_seconds, policy.jitter_span_seconds
            )
        member, number, at, off = _plan_group(
            zones[zone_code],
            busdays[key],
            policy,
            rows.failed_us[rows_idx],
            seeds[members],
            verdicts.count[rows_idx],
            verdicts.min_gap_us[rows_idx],
            rows.gateway[rows_idx],
            blackouts,
        )
        parts.append((rows_idx[member], number, at, off))
        done += rows_idx.size
        if on_progress is not None:
            on_progress(done, total)

    empty = np.zeros(0, dtype=np.int64)
    attempt_row = np.concatenate([p[0] for p in parts]) if parts else empty
    number = np.concatenate([p[1] for p in parts]) if parts else empty
    at = np.concatenate([p[2] for p in parts]) if parts else empty
    off = np.concatenate([p[3] for p in parts]) if parts else empty
    order = np.lexsort((number, attempt_row))
    planned = np.zeros(total, dtype=bool)
    planned[attempt_row] = True
    kind[(kind == RETRY) & ~planned] = NO_RETRY  # no attempt fits: the planner says NoRetry
    return ReplayResult(
        rows=rows,
        kind=kind,
        attempt_row=attempt_row[order],
        attempt_number=number[order],
        attempt_at=at[order],
        attempt_offset=off[order],
        unknown_codes=verdicts.unknown_codes,
    )


def attempts_of(result: ReplayResult, row: int) -> list[tuple[int, int, int]]:
    """(attempt number, UTC seconds, offset) of one row's attempts, for comparisons."""
    lo, hi = np.searchsorted(result.attempt_row, [row, row + 1])
    return [
        (int(result.attempt_number[i]), int(result.attempt_at[i]), int(result.attempt_offset[i]))
        for i in range(int(lo), int(hi))
    ]


__all__ = [
    "AWAIT_CUSTOMER",
    "KIND_NAMES",
    "NO_RETRY",
    "RETRY",
    "ReplayResult",
    "attempts_of",
    "replay_failures",
]
