"""Reading a failures CSV into coded columns, with a line-numbered `BadRow` for each row refused.

Two paths give the same rows: a plain file (no quotes, no ragged or blank lines) is split as bytes
by numpy, without a Python object per cell; anything else goes through the `csv` module. Every
cell is checked as `recoup plan` checks its options: instants, IANA zones, countries.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

from recoup.analytics.replay._units import I64, US, to_us
from recoup.dunning.planner import Failure
from recoup.errors import InvalidInput
from recoup.timekeeping.calendar import BusinessCalendar
from recoup.timekeeping.instants import MAX_YEAR, MIN_YEAR, parse_instant
from recoup.timekeeping.zones import zone

REQUIRED_COLUMNS = ("invoice_id", "failed_at", "timezone")
OPTIONAL_COLUMNS = ("country", "decline_code", "advice_code", "gateway", "merchant_id")
ADVICE_SEPARATOR = ";"  # several advice codes in one cell: "25;try_again_later"


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
    try:
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
    except csv.Error as exc:  # what no row can be read past (the csv module stops there)
        raise InvalidInput(
            f"FAILURES.csv line {reader.line_num}", str(exc), "expected comma-separated values"
        ) from None
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
            out[picked] = seconds * US
        except ValueError:
            slow = list(range(array.size))
        else:
            # The fast path accepts any year numpy does: years outside the accepted range go
            # through `parse_instant`, which refuses them (a bad row, not an overflow later).
            lo = to_us(datetime(MIN_YEAR, 1, 1, tzinfo=UTC))
            hi = to_us(datetime(MAX_YEAR + 1, 1, 1, tzinfo=UTC))
            outside = picked[(out[picked] < lo) | (out[picked] >= hi)]
            slow = sorted([*slow, *outside.tolist()])
    bad: list[int] = []
    for i in slow:
        value = array[i]
        text = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
        try:
            out[i] = to_us(parse_instant("failed_at", text))
        except InvalidInput:
            bad.append(i)
    return out, bad


def read_failures(text: str, *, strict: bool = False) -> tuple[FailureRows, list[BadRow]]:
    """Parse a failures CSV (header `invoice_id,failed_at,timezone` and optional `country,
    decline_code,advice_code,gateway,merchant_id`; other columns are ignored).

    Returns the good rows and the bad ones by line number; with `strict`, the first bad row
    raises `InvalidInput` naming its line instead. A missing required column always raises."""
    # Line ends as a file read in text mode has them (universal newlines: \r\n and \r).
    text = text.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\ufeff")
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


__all__ = [
    "ADVICE_SEPARATOR",
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "BadRow",
    "FailureRows",
    "read_failures",
    "split_advice",
]
