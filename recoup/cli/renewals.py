"""`recoup renewals`: the renewals of a billing anchor, n = 1..count.

Contract (later tooling depends on it):

    recoup renewals --anchor 2026-01-31T09:00 --timezone America/New_York
        [--every month] [--interval 1] [--end-of-month clamp] [--count 12] [--json]

`--json` prints one object, `{"anchor": {"local", "timezone", "every", "interval",
"end_of_month"}, "occurrences": [{"n", "at", "local"}, ...]}` with `at` in UTC (`Z`) and
`local` the wall time with its offset. Invalid input exits 2 with one line naming the option,
renewals past 9999-12-31 included (`--count`, or `--interval` when even the first is).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final

import typer
from rich.console import Console
from rich.table import Table

from recoup.cli._app import app, print_json
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import format_local, format_utc
from recoup.timekeeping.recurrence import (
    DEFAULT_END_OF_MONTH,
    END_OF_MONTH_RULES,
    EVERY,
    LAST_REPRESENTABLE,
    Anchor,
    Occurrence,
    OutOfRange,
    occurrence_at,
)

MAX_COUNT: Final = 10_000  # renewals per invocation; more is a mistake, not a report

# Anchor's field names → the options that feed them, so errors name what the user typed.
_OPTION_FOR_FIELD: Final = {
    "local": "--anchor",
    "timezone": "--timezone",
    "every": "--every",
    "interval": "--interval",
    "end_of_month": "--end-of-month",
}


@app.command()
def renewals(
    anchor: Annotated[
        str, typer.Option(help="Local date-time of the anchor (n = 0), e.g. 2026-01-31T09:00.")
    ],
    timezone: Annotated[str, typer.Option(help="IANA time zone, e.g. America/New_York.")],
    every: Annotated[str, typer.Option(help=f"Step unit: {', '.join(EVERY)}.")] = "month",
    interval: Annotated[int, typer.Option(help="Steps between renewals (≥ 1).")] = 1,
    end_of_month: Annotated[
        str, typer.Option(help=f"Missing-day rule: {', '.join(END_OF_MONTH_RULES)}.")
    ] = DEFAULT_END_OF_MONTH,
    count: Annotated[int, typer.Option(help="How many renewals to print (n = 1..count).")] = 12,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Print the renewals of a billing anchor, each computed from the anchor and n."""
    rule = _build_anchor(anchor, timezone, every, interval, end_of_month)
    if count < 1 or count > MAX_COUNT:
        raise InvalidInput("--count", count, f"expected an integer from 1 to {MAX_COUNT}")
    try:
        found = [occurrence_at(rule, n) for n in range(1, count + 1)]
    except OutOfRange as exc:
        raise _past_the_end(exc.value, count, interval, anchor) from None
    if as_json:
        print_json(_as_json(rule, found))
    else:
        _print_table(rule, found)


def _build_anchor(text: str, timezone: str, every: str, interval: int, rule: str) -> Anchor:
    try:
        local = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(
            "--anchor", text, "expected a local date-time such as 2026-01-31T09:00"
        ) from None
    if local.tzinfo is not None:
        raise InvalidInput(
            "--anchor", text, "expected a local date-time without an offset (see --timezone)"
        )
    try:
        return Anchor(
            local=local, timezone=timezone, every=every, interval=interval, end_of_month=rule
        )
    except InvalidInput as exc:
        option = _OPTION_FOR_FIELD.get(exc.field, exc.field)
        shown = text if exc.field == "local" else exc.value
        raise InvalidInput(option, shown, exc.allowed) from None


def _past_the_end(n: object, count: int, interval: int, anchor: str) -> InvalidInput:
    """Renewal `n` falls past 9999-12-31: name the option that asked for it."""
    if n == 1:
        option, shown = ("--interval", interval) if interval > 1 else ("--anchor", anchor)
        allowed = f"the first renewal falls after {LAST_REPRESENTABLE}, the last representable date"
        return InvalidInput(option, shown, allowed)
    return InvalidInput(
        "--count",
        count,
        f"renewal {n} falls after {LAST_REPRESENTABLE}, the last representable date; "
        f"expected at most {n - 1 if isinstance(n, int) else 'fewer'} for this anchor",
    )


def _as_json(rule: Anchor, found: list[Occurrence]) -> dict[str, Any]:
    return {
        "anchor": {
            "local": rule.local.isoformat(timespec="seconds"),
            "timezone": rule.timezone,
            "every": rule.every,
            "interval": rule.interval,
            "end_of_month": rule.end_of_month,
        },
        "occurrences": [
            {"n": o.n, "at": format_utc(o.at), "local": format_local(o.local)} for o in found
        ],
    }


def _print_table(rule: Anchor, found: list[Occurrence]) -> None:
    step = rule.every if rule.interval == 1 else f"{rule.interval} {rule.every}s"
    table = Table(
        title=(
            f"Renewals of {rule.local.isoformat(timespec='minutes')} {rule.timezone}, "
            f"every {step}, {rule.end_of_month}"
        )
    )
    table.add_column("n", justify="right", no_wrap=True)
    table.add_column("local", no_wrap=True)
    table.add_column("UTC", no_wrap=True)
    table.add_column("note")
    for o in found:
        note = ""
        if o.local.replace(tzinfo=None) != o.nominal:
            # The asked-for wall time fell in a DST gap and moved forward by the gap.
            note = f"{o.nominal.strftime('%H:%M')} does not exist (DST gap)"
        table.add_row(str(o.n), o.local.strftime("%a %Y-%m-%d %H:%M %z"), format_utc(o.at), note)
    Console().print(table)
