"""The dry-run replay: plan a month of failures with a policy, in bulk, and see where retries land.

It gives, for every row, exactly what `plan_retries` gives for that failure with no card history
(a CSV has no card column): the same decision kind and the same attempts to the second. It gets
there in bulk rather than per invoice:

- rows are grouped by (customer zone, business calendar); decline codes are classified once per
  distinct (decline code, advice codes) pair;
- local dates come from UTC instants through `recoup.timekeeping.bulk.ZoneOffsets` (offsets
  computed once per distinct UTC day), then integer arithmetic;
- business-day steps are `numpy.busday_offset` with the calendar's weekmask and holidays;
- the window's wall time is turned back into UTC by the same `ZoneOffsets`, once per distinct
  (zone, date); dates whose window crosses a DST change fall back to `resolve_local` row by
  row, so the DST rule is exactly the planner's;
- jitter is `recoup.dunning.jitter`, the planner's own function, over whole arrays.

Nothing is written to any job store. Reading the CSV and writing the planned attempts also live
here because they are the replay's input and output formats.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from recoup.dunning.jitter import invoice_seeds, jitter_seconds
from recoup.dunning.landing import customer_calendar, reference_shift_seconds
from recoup.dunning.outcomes import idempotency_key
from recoup.dunning.planner import Failure
from recoup.dunning.policy import GapUnit, RetryPolicy
from recoup.dunning.taxonomy import DeclineClass, Taxonomy, classify, default_taxonomy
from recoup.errors import InvalidInput
from recoup.timekeeping.bulk import ZoneOffsets
from recoup.timekeeping.calendar import BusinessCalendar
from recoup.timekeeping.instants import MAX_YEAR, MIN_YEAR, parse_instant
from recoup.timekeeping.zones import zone

I64 = npt.NDArray[np.int64]

REQUIRED_COLUMNS = ("invoice_id", "failed_at", "timezone")
OPTIONAL_COLUMNS = ("country", "decline_code", "advice_code", "gateway", "merchant_id")
ADVICE_SEPARATOR = ";"  # several advice codes in one cell: "25;try_again_later"

RETRY, NO_RETRY, AWAIT_CUSTOMER = 0, 1, 2
KIND_NAMES = ("retry", "no_retry", "await_customer")

_DAY = 86_400  # seconds
_US = 1_000_000  # microseconds per second
_HOLIDAY_MARGIN = 14  # days of holidays loaded either side of the dates a replay can reach


# ---- input ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BadRow:
    """A CSV row that was not planned: its line number (the header is line 1), the column at
    fault, the value found and what was expected."""

    line: int
    column: str
    value: str
    expected: str

    @property
    def message(self) -> str:
        return f"line {self.line}: {self.column} {self.value!r}: {self.expected}"


@dataclass(frozen=True)
class FailureRows:
    """Failures in columns. String columns are coded: `zone[i]` indexes `zones`, and so on;
    `failed_us` is the failure instant in microseconds since the Unix epoch (UTC)."""

    line: I64
    invoice: list[str]
    failed_us: I64
    zone: npt.NDArray[np.int32]
    zones: list[str]
    country: npt.NDArray[np.int32]
    countries: list[str]
    decline: npt.NDArray[np.int32]
    declines: list[str]
    advice: npt.NDArray[np.int32]
    advices: list[str]
    gateway: npt.NDArray[np.int32]
    gateways: list[str]
    merchant: npt.NDArray[np.int32]
    merchants: list[str]

    def __len__(self) -> int:
        return len(self.invoice)

    def take(self, keep: npt.NDArray[np.bool_]) -> FailureRows:
        """Only the rows where `keep` is true (codes and their tables unchanged)."""
        return FailureRows(
            line=self.line[keep],
            invoice=[s for s, k in zip(self.invoice, keep.tolist(), strict=True) if k],
            failed_us=self.failed_us[keep],
            zone=self.zone[keep],
            zones=self.zones,
            country=self.country[keep],
            countries=self.countries,
            decline=self.decline[keep],
            declines=self.declines,
            advice=self.advice[keep],
            advices=self.advices,
            gateway=self.gateway[keep],
            gateways=self.gateways,
            merchant=self.merchant[keep],
            merchants=self.merchants,
        )

    def failure(self, i: int) -> Failure:
        """Row `i` as the planner's `Failure` (what `recoup plan` would be given)."""
        advice = self.advices[self.advice[i]]
        return Failure(
            invoice=self.invoice[i],
            failed_at=datetime.fromtimestamp(0, UTC)
            + timedelta(microseconds=int(self.failed_us[i])),
            timezone=self.zones[self.zone[i]],
            country=self.countries[self.country[i]] or None,
            decline_code=self.declines[self.decline[i]] or None,
            advice_codes=split_advice(advice),
            gateway=self.gateways[self.gateway[i]] or None,
            merchant_id=self.merchants[self.merchant[i]] or None,
        )


def split_advice(cell: str) -> tuple[str, ...]:
    """`"25;try_again_later"` → `("25", "try_again_later")`."""
    return tuple(part.strip() for part in cell.split(ADVICE_SEPARATOR) if part.strip())


# A column of text, either as Python strings (the `csv` path) or as one numpy array of
# fixed-width bytes (the fast path, which never makes a Python object per cell).
_Column = list[str] | npt.NDArray[np.bytes_]


def _factorize(column: _Column) -> tuple[npt.NDArray[np.int32], list[str]]:
    """Codes and the distinct values they index (decoded as UTF-8)."""
    if isinstance(column, list):
        index = {value: i for i, value in enumerate(dict.fromkeys(column))}
        codes = np.array(list(map(index.__getitem__, column)), dtype=np.int32)
        return codes, list(index)
    uniq, inverse = np.unique(column, return_inverse=True)
    values = [bytes(v).decode("utf-8", errors="replace") for v in uniq.tolist()]
    return inverse.astype(np.int32).reshape(-1), values


def _strings(column: _Column) -> list[str]:
    if isinstance(column, list):
        return column
    try:
        return column.astype(np.str_).tolist()  # type: ignore[no-any-return]  # ASCII: fast
    except UnicodeDecodeError:
        return [bytes(v).decode("utf-8", errors="replace") for v in column.tolist()]


def _split_bytes(text: str) -> tuple[list[str], dict[str, npt.NDArray[np.bytes_]]] | None:
    """Header and byte columns of a plain CSV (no quotes, every line the same field count,
    no blank line), or None when the file needs the `csv` module. A million rows split this way
    cost a fraction of a second, where a Python string per cell costs seconds."""
    if '"' in text:
        return None
    header = text[: text.index("\n")].split(",") if "\n" in text else text.split(",")
    width = len(header)
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    ends = np.flatnonzero((data == ord(",")) | (data == ord("\n")))
    if ends.size % width:
        return None
    grid = ends.reshape(-1, width)
    if not (data[grid[:, -1]] == ord("\n")).all() or not (data[grid[:, :-1]] == ord(",")).all():
        return None
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    start_grid = starts.reshape(-1, width)[1:]
    end_grid = grid[1:]
    columns: dict[str, npt.NDArray[np.bytes_]] = {}
    for c, name in enumerate(header):
        first, length = start_grid[:, c], end_grid[:, c] - start_grid[:, c]
        wide = int(length.max(initial=0))
        cells = np.zeros((first.size, max(wide, 1)), dtype=np.uint8)
        for k in range(wide):  # one gather per character position, not per cell
            has = length > k
            cells[has, k] = data[first[has] + k]
        columns[name.strip()] = cells.view(f"S{max(wide, 1)}").reshape(-1)
    return [h.strip() for h in header], columns


def _split_csv(text: str) -> tuple[list[str], dict[str, list[str]], list[int], list[BadRow]]:
    """Header, columns, line numbers and bad rows, through the `csv` module (quotes, ragged
    rows, blank lines)."""
    reader = csv.reader(io.StringIO(text))
    header = [h.strip() for h in next(reader, [])]
    width = len(header)
    cells: list[list[str]] = [[] for _ in range(width)]
    lines: list[int] = []
    bad: list[BadRow] = []
    start = reader.line_num + 1
    for row in reader:
        line, start = start, reader.line_num + 1
        if not row or all(not cell.strip() for cell in row):
            continue  # a blank line is not a row
        if len(row) != width:
            bad.append(BadRow(line, "row", ",".join(row), f"expected {width} fields"))
            continue
        lines.append(line)
        for c, cell in enumerate(row):
            cells[c].append(cell)
    return header, dict(zip(header, cells, strict=True)), lines, bad


def _parse_instants(column: _Column) -> tuple[I64, list[int]]:
    """Microseconds since the epoch for each text, and the indices that do not parse.

    `YYYY-MM-DDTHH:MM:SSZ` (the common case) is parsed by numpy in bulk; anything else goes
    through `parse_instant`, as `recoup plan --failed-at` does."""
    array = np.array(column) if isinstance(column, list) else column
    out = np.zeros(array.size, dtype=np.int64)
    if not array.size:
        return out, []
    unit = np.uint32 if array.dtype.kind == "U" else np.uint8
    chars = array.view(unit).reshape(array.size, -1)
    fast = np.zeros(array.size, dtype=bool)
    if chars.shape[1] >= 20:
        fast = (chars[:, 19] == ord("Z")) & (chars[:, 10] == ord("T")) & (chars[:, 4] == ord("-"))
        if chars.shape[1] > 20:
            fast &= chars[:, 20] == 0
    slow = np.flatnonzero(~fast).tolist()
    if fast.any():
        picked = np.flatnonzero(fast)
        try:
            kind = "U19" if array.dtype.kind == "U" else "S19"
            seconds = array[picked].astype(kind).astype("datetime64[s]").astype(np.int64)
            out[picked] = seconds * _US
        except ValueError:
            slow = list(range(array.size))
        else:
            # The fast path accepts any year numpy does: years outside the accepted range go
            # through `parse_instant`, which refuses them (a bad row, not an overflow later).
            lo = _to_us(datetime(MIN_YEAR, 1, 1, tzinfo=UTC))
            hi = _to_us(datetime(MAX_YEAR + 1, 1, 1, tzinfo=UTC))
            outside = picked[(out[picked] < lo) | (out[picked] >= hi)]
            slow = sorted([*slow, *outside.tolist()])
    bad: list[int] = []
    for i in slow:
        value = array[i]
        text = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
        try:
            out[i] = _to_us(parse_instant("failed_at", text))
        except InvalidInput:
            bad.append(i)
    return out, bad


def read_failures(text: str, *, strict: bool = False) -> tuple[FailureRows, list[BadRow]]:
    """Parse a failures CSV (header `invoice_id,failed_at,timezone` and optional `country,
    decline_code,advice_code,gateway,merchant_id`; other columns are ignored).

    Returns the good rows and the bad ones by line number; with `strict`, the first bad row
    raises `InvalidInput` naming its line instead. A missing required column always raises."""
    text = text.replace("\r\n", "\n").removeprefix("\ufeff")
    if not text.endswith("\n"):
        text += "\n"
    bad: list[BadRow] = []
    columns: dict[str, _Column]
    fast = _split_bytes(text)
    if fast is not None:
        names, byte_columns = fast
        columns = dict(byte_columns)
        count = byte_columns[names[0]].size if names else 0
        lines = np.arange(2, 2 + count, dtype=np.int64)
    else:
        names, text_columns, line_list, bad = _split_csv(text)
        columns = dict(text_columns)
        count = len(line_list)
        lines = np.asarray(line_list, dtype=np.int64)
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise InvalidInput(
            "FAILURES.csv header", ",".join(names), f"expected the columns {', '.join(missing)}"
        )
    empty: _Column = [""] * count

    invoice = _strings(columns["invoice_id"])
    failed_us, unparsed = _parse_instants(columns["failed_at"])
    coded = {name: _factorize(columns.get(name, empty)) for name in ("timezone", *OPTIONAL_COLUMNS)}

    problems: dict[int, tuple[str, str, str]] = {}
    raw_times = columns["failed_at"]
    for i in unparsed:
        value = raw_times[i]
        shown = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        problems.setdefault(
            i,
            (
                "failed_at",
                shown,
                f"expected an ISO-8601 instant with an offset, in the years {MIN_YEAR}–{MAX_YEAR}",
            ),
        )
    if invoice.count(""):
        for i in (i for i, value in enumerate(invoice) if not value):
            problems.setdefault(i, ("invoice_id", "", "expected a non-empty invoice id"))
    zone_codes, zone_names = coded["timezone"]
    for code, name in enumerate(zone_names):
        try:
            zone(name)
        except InvalidInput:
            for i in np.flatnonzero(zone_codes == code).tolist():
                problems.setdefault(i, ("timezone", name, "expected an IANA time zone name"))
    country_codes, country_names = coded["country"]
    for code, name in enumerate(country_names):
        if not name.strip():
            continue
        try:
            BusinessCalendar(country=name.strip().upper())
        except InvalidInput:
            for i in np.flatnonzero(country_codes == code).tolist():
                problems.setdefault(
                    i, ("country", name, "expected a country code the holidays package knows")
                )
    bad.extend(BadRow(int(lines[i]), *problem) for i, problem in problems.items())
    bad.sort(key=lambda b: b.line)
    if strict and bad:
        first = bad[0]
        raise InvalidInput(
            f"FAILURES.csv line {first.line}: {first.column}", first.value, first.expected
        )

    def stripped(name: str) -> list[str]:
        return [v.strip() for v in coded[name][1]]

    rows = FailureRows(
        line=lines,
        invoice=invoice,
        failed_us=failed_us,
        zone=zone_codes,
        zones=zone_names,
        country=country_codes,
        countries=[c.upper() for c in stripped("country")],
        decline=coded["decline_code"][0],
        declines=stripped("decline_code"),
        advice=coded["advice_code"][0],
        advices=coded["advice_code"][1],
        gateway=coded["gateway"][0],
        gateways=stripped("gateway"),
        merchant=coded["merchant_id"][0],
        merchants=stripped("merchant_id"),
    )
    if problems:
        keep = np.ones(count, dtype=bool)
        keep[list(problems)] = False
        rows = rows.take(keep)
    return rows, bad


# ---- planning in bulk -------------------------------------------------------------------------


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


def _verdicts(rows: FailureRows, policy: RetryPolicy, taxonomy: Taxonomy) -> _Verdicts:
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
        gaps.append(max(policy.min_gap_seconds, verdict.min_delay_hours * 3600) * _US)
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


def _to_us(instant: datetime) -> int:
    delta = instant - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * _DAY + delta.seconds) * _US + delta.microseconds


def _plan_group(
    offsets: ZoneOffsets,
    cal: np.busdaycalendar,
    policy: RetryPolicy,
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
    deadline_us = failed_us + policy.max_duration_seconds * _US
    failed_off = offsets.at(failed_us // _US)
    ref_day = (failed_us + (failed_off + shift) * _US) // (_DAY * _US)
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
            at_us = at[pending] * _US
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
        kept = at * _US <= deadline_us[members]
        alive[members[~kept]] = False
        who, at, off = members[kept], at[kept], off[kept]
        out_member.append(who)
        out_number.append(np.full(who.size, k, dtype=np.int64))
        out_at.append(at)
        out_off.append(off)
        ref_us[who] = at * _US
        ref_day[who] = (at + off + shift) // _DAY
    empty = np.zeros(0, dtype=np.int64)
    return (
        np.concatenate(out_member) if out_member else empty,
        np.concatenate(out_number) if out_number else empty,
        np.concatenate(out_at) if out_at else empty,
        np.concatenate(out_off) if out_off else empty,
    )


def replay_failures(
    rows: FailureRows,
    policy: RetryPolicy,
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
    calendars = [customer_calendar(policy, c or None) for c in rows.countries]
    cal_keys: dict[tuple[frozenset[int], str | None], int] = {}
    cal_code = np.array(
        [cal_keys.setdefault((c.weekend, c.country), len(cal_keys)) for c in calendars] or [0],
        dtype=np.int64,
    )[rows.country]
    blackouts = {
        code: [(_to_us(b.start), _to_us(b.end)) for b in policy.blackouts_for(name)]
        for code, name in enumerate(rows.gateways)
        if policy.blackouts_for(name)
    }
    seeds = invoice_seeds((rows.invoice[i] for i in soft.tolist()), policy.fingerprint)

    group = rows.zone[soft].astype(np.int64) * max(len(cal_keys), 1) + cal_code[soft]
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    members_all = np.split(order, bounds) if order.size else []
    failed_days = rows.failed_us[soft] // (_DAY * _US)
    first_day = int(failed_days.min()) - 1 if soft.size else 0
    last_day = int(failed_days.max()) + policy.max_duration_days + 1 if soft.size else 0
    cal_by_key = {v: k for k, v in cal_keys.items()}
    busdays: dict[int, np.busdaycalendar] = {}
    zones: dict[int, ZoneOffsets] = {}
    parts: list[tuple[I64, I64, I64, I64]] = []
    done = total - soft.size
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


# ---- output -----------------------------------------------------------------------------------


def _histograms(at: I64, offset: I64) -> dict[str, Any]:
    minutes = at // 60
    peak = int(np.bincount(minutes - minutes.min()).max()) if at.size else 0
    return {
        "attempts": int(at.size),
        "by_utc_hour": np.bincount((at // 3600) % 24, minlength=24).tolist(),
        "by_local_hour": np.bincount(((at + offset) // 3600) % 24, minlength=24).tolist(),
        "peak_per_minute": peak,
    }


def nightly_baseline(result: ReplayResult) -> tuple[I64, I64]:
    """The old nightly batch: every planned attempt runs at 00:00 UTC of its UTC date instead
    (same attempts, same days; only the time of day differs). UTC seconds and local offsets."""
    at = result.attempt_at // _DAY * _DAY
    offset = np.zeros_like(at)
    zone_of = result.rows.zone[result.attempt_row]
    for code in np.unique(zone_of).tolist():
        mine = zone_of == code
        offset[mine] = ZoneOffsets(zone(result.rows.zones[code]), 0, 0).at(at[mine])
    return at, offset


def summarize(result: ReplayResult, *, compare_nightly: bool = False) -> dict[str, Any]:
    """The `--json` summary: counts by decision, hour histograms (UTC and local), the
    busiest minute and `unknown_codes` (rows per decline code the taxonomy does not know);
    with `compare_nightly`, the same figures for the nightly batch."""
    counts = np.bincount(result.kind, minlength=3)
    summary: dict[str, Any] = {
        "invoices": len(result.rows),
        "retry": int(counts[RETRY]),
        "no_retry": int(counts[NO_RETRY]),
        "await_customer": int(counts[AWAIT_CUSTOMER]),
        **_histograms(result.attempt_at, result.attempt_offset),
        "unknown_codes": dict(result.unknown_codes),
    }
    if compare_nightly:
        summary["nightly"] = _histograms(*nightly_baseline(result))
    return summary


def _offset_text(seconds: int) -> str:
    probe = datetime(2000, 1, 1, tzinfo=timezone(timedelta(seconds=seconds)))
    return probe.isoformat()[19:]  # what `format_local` prints after the wall time


def planned_lines(result: ReplayResult, *, chunk: int = 200_000) -> Iterator[str]:
    """The `--out` CSV, line by line: `invoice_id,attempt,at,local,idempotency_key`, in row
    order then attempt order; the same text `recoup plan` prints for each attempt."""
    yield "invoice_id,attempt,at,local,idempotency_key\n"
    invoices = result.rows.invoice
    needs_quoting = any(("," in s or '"' in s or "\n" in s) for s in invoices)
    for start in range(0, result.attempt_at.size, chunk):
        stop = start + chunk
        at = result.attempt_at[start:stop]
        off = result.attempt_offset[start:stop]
        at_text = np.datetime_as_string(at.astype("datetime64[s]"), unit="s").tolist()
        local_text = np.datetime_as_string((at + off).astype("datetime64[s]"), unit="s").tolist()
        suffix = {o: _offset_text(o) for o in np.unique(off).tolist()}
        rows = result.attempt_row[start:stop].tolist()
        numbers = result.attempt_number[start:stop].tolist()
        offsets = off.tolist()
        if needs_quoting:
            buffer = io.StringIO()
            writer = csv.writer(buffer, lineterminator="\n")
            for r, k, a, loc, o in zip(rows, numbers, at_text, local_text, offsets, strict=True):
                inv = invoices[r]
                writer.writerow([inv, k, a + "Z", loc + suffix[o], idempotency_key(inv, k)])
            yield buffer.getvalue()
        else:
            yield "".join(
                f"{invoices[r]},{k},{a}Z,{loc}{suffix[o]},retry:{invoices[r]}:{k}\n"
                for r, k, a, loc, o in zip(rows, numbers, at_text, local_text, offsets, strict=True)
            )


def write_planned(result: ReplayResult, out: TextIO) -> None:
    """Write the `--out` CSV to `out`."""
    for text in planned_lines(result):
        out.write(text)


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
    "BadRow",
    "FailureRows",
    "ReplayResult",
    "attempts_of",
    "nightly_baseline",
    "planned_lines",
    "read_failures",
    "replay_failures",
    "split_advice",
    "summarize",
    "write_planned",
]
