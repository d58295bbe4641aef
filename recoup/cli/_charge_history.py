"""Reading a charge history CSV (for `recoup anchors recover`) into one local date per charge,
refusing the first bad cell with its line and column, as `recoup replay --strict` does.

Columns (a header line names them, in any order; other columns are ignored):

- `customer_id` (required): who was charged;
- `charged_at` (required): an ISO-8601 instant with its offset (`2025-01-31T09:00:00Z`),
  read in the customer's zone, or a local date (`2025-01-31`) or local date-time taken as is;
- `timezone` (optional): the IANA zone an instant is read in; UTC when absent or empty;
- `amount` (optional): a decimal number ≥ 0, carried into the report.

Plain `csv` rather than numpy: the command belongs to the core install, which has no numpy.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Final

from recoup.errors import InvalidInput
from recoup.timekeeping.instants import MAX_YEAR, MIN_YEAR, require_in_range
from recoup.timekeeping.zones import to_local, zone

REQUIRED_COLUMNS: Final = ("customer_id", "charged_at")
OPTIONAL_COLUMNS: Final = ("timezone", "amount")
CHARGED_AT_ALLOWED: Final = (
    "expected an ISO-8601 instant with an offset (2025-01-31T09:00:00Z) or a local date "
    f"(2025-01-31), in the years {MIN_YEAR}–{MAX_YEAR}"
)


@dataclass(frozen=True, kw_only=True)
class Charge:
    """One row: the customer, the local date of the charge, its line (the header is line 1)
    and its amount as written (None when the column is absent or the cell empty)."""

    customer: str
    charged: date
    line: int
    amount: Decimal | None


def read_charge_history(text: str, *, source: str = "HISTORY.csv") -> list[Charge]:
    """Every charge of the CSV `text`, in file order. `InvalidInput` names `source`, the line
    and the column of the first cell refused (or the header, when a column is missing)."""
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff")))
    try:
        header = [h.strip() for h in next(reader, [])]
        at = _columns(header, source)
        charges: list[Charge] = []
        start = reader.line_num + 1
        for row in reader:
            line, start = start, reader.line_num + 1
            if not row or all(not cell.strip() for cell in row):
                continue  # a blank line is not a row
            if len(row) != len(header):
                raise InvalidInput(
                    f"{source} line {line}", ",".join(row), f"expected {len(header)} fields"
                )
            charges.append(_charge(row, at, line, source))
    except csv.Error as exc:  # a stray quote or a NUL byte: the csv module names no column
        raise InvalidInput(
            f"{source} line {reader.line_num}", str(exc), "expected well-formed CSV"
        ) from None
    return charges


def _columns(header: list[str], source: str) -> dict[str, int]:
    """Where each known column is; `InvalidInput` naming the header when one is missing."""
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InvalidInput(
            f"{source} header",
            ",".join(header),
            f"expected the columns {', '.join(REQUIRED_COLUMNS)} "
            f"(and optionally {', '.join(OPTIONAL_COLUMNS)}); missing {', '.join(missing)}",
        )
    known = (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS)
    return {name: header.index(name) for name in known if name in header}


def _charge(row: list[str], at: dict[str, int], line: int, source: str) -> Charge:
    def cell(name: str) -> str:
        return row[at[name]].strip() if name in at else ""

    def bad(name: str, allowed: str) -> InvalidInput:
        return InvalidInput(f"{source} line {line}: {name}", cell(name), allowed)

    customer = cell("customer_id")
    if not customer:
        raise bad("customer_id", "expected a non-empty customer id")
    tz = cell("timezone") or "UTC"
    try:
        zone(tz)
    except InvalidInput:
        raise bad("timezone", "expected an IANA time zone name such as Europe/Paris") from None
    try:
        charged = _local_date(cell("charged_at"), tz)
    except ValueError:
        raise bad("charged_at", CHARGED_AT_ALLOWED) from None
    try:
        amount = _amount(cell("amount"))
    except ValueError:
        raise bad("amount", "expected a decimal number ≥ 0, such as 19.99") from None
    return Charge(customer=customer, charged=charged, line=line, amount=amount)


def _local_date(text: str, tz: str) -> date:
    """The local date `text` means in `tz`; ValueError when it is not one we accept."""
    if len(text) == len("2025-01-31"):
        found = date.fromisoformat(text)
    else:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:  # a local wall time: its own date
            found = moment.date()
        else:
            try:
                instant = require_in_range("charged_at", moment)
            except InvalidInput:
                raise ValueError(text) from None
            found = to_local(instant, tz).date()
    if not MIN_YEAR <= found.year <= MAX_YEAR:
        raise ValueError(text)
    return found


def _amount(text: str) -> Decimal | None:
    """The amount, None for an empty cell; ValueError unless a finite number ≥ 0."""
    if not text:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise ValueError(text) from None
    if not value.is_finite() or value < 0:
        raise ValueError(text)
    return value


__all__ = [
    "CHARGED_AT_ALLOWED",
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "Charge",
    "read_charge_history",
]
