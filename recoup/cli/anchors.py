"""`recoup anchors recover`: from a charge history, each customer's true billing anchor, the
charges that drifted from it, and the corrected next renewal.

Contract (later tooling depends on it):

    recoup anchors recover HISTORY.csv [--rule clamp|roll-forward|last-day|restrict]
        [--as-of YYYY-MM-DD] [--json]

HISTORY.csv columns: `customer_id,charged_at[,timezone][,amount]` (see `_charge_history.py`).
`--json` prints one object:

    {"as_of": DATE|null, "rule": RULE|null,
     "summary": {"customers", "recovered", "with_drift", "insufficient", "ambiguous",
                 "inconsistent", "unsupported"},
     "customers": [{"customer_id", "status", "reason", "charges", "first_charge",
                    "last_charge", "anchor": {"day", "end_of_month", "interval_months",
                    "also_fits"}|null, "drifted": [{"n", "line", "charged", "expected",
                    "amount"}], "next_renewal", "drifting_next", "extra_days"}]}

Every customer carries every key (null where it does not apply), customers sorted by id.
`drifted[].n` is the period the charge fell in (0: the first charge), `line` its CSV line;
`drifting_next` is when the drifting schedule would charge next (what the customer has paid
up to; null when nothing drifted) and `extra_days` how much later `next_renewal` is.
`status` is one of `recovered`, `insufficient`, `ambiguous`, `inconsistent`, `unsupported`
with a one-sentence `reason` for all but `recovered`. Dates are local `YYYY-MM-DD`. Bad input
(a bad cell, an unknown rule, an `--as-of` before a charge) exits 2 with one line naming the
line and column or the option; customers that cannot be recovered are reported, not errors.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

from recoup.cli._app import JsonOption, app, print_json
from recoup.cli._charge_history import Charge, read_charge_history
from recoup.errors import InvalidInput
from recoup.timekeeping.anchor_recovery import (
    STATUSES,
    RecoveredAnchor,
    Unrecovered,
    recover_anchor,
)
from recoup.timekeeping.instants import MAX_YEAR, MIN_YEAR
from recoup.timekeeping.recurrence import END_OF_MONTH_RULES

anchors_app = typer.Typer(
    help="Billing anchors: recover each customer's true anchor from a charge history.",
    no_args_is_help=True,
)
app.add_typer(anchors_app, name="anchors")

HISTORY_HELP = (
    "CSV with a header: customer_id, charged_at (an ISO-8601 instant with its offset, read in "
    "the customer's zone, or a local date YYYY-MM-DD), optional timezone (IANA; UTC when "
    "empty) and amount."
)


@anchors_app.command("recover")
def recover_command(
    history: Annotated[Path, typer.Argument(metavar="HISTORY.csv", help=HISTORY_HELP)],
    rule: Annotated[
        str | None,
        typer.Option(
            "--rule",
            help=f"The month-end rule, if known ({', '.join(END_OF_MONTH_RULES)}); "
            "otherwise the one that explains each history best.",
        ),
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="Today, YYYY-MM-DD: no next renewal before it (default: the one after the "
            "last charge).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Recover each customer's true anchor and month-end rule from their past charges, list
    the charges that drifted from it (a renewal computed from the previous one: Jan 31 →
    Feb 28 → Mar 28), and give the corrected next renewal, applied at the next renewal with
    the longer period standing (never earlier than the drifting schedule would charge).
    Monthly cadences (every N months) only; at least 3 charges per customer."""
    if rule is not None and rule not in END_OF_MONTH_RULES:
        raise InvalidInput("--rule", rule, f"expected one of {', '.join(END_OF_MONTH_RULES)}")
    today = _parse_as_of(as_of)
    try:
        text = history.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            str(history), str(history), f"expected a readable UTF-8 CSV file ({exc})"
        ) from None
    charges = read_charge_history(text, source=str(history))
    by_customer: dict[str, list[Charge]] = defaultdict(list)
    for charge in charges:
        by_customer[charge.customer].append(charge)
    if today is not None:
        late = max(charges, key=lambda c: c.charged, default=None)
        if late is not None and late.charged > today:
            raise InvalidInput(
                "--as-of",
                as_of,
                f"expected a date on or after every charge; line {late.line} charges "
                f"{late.customer} on {late.charged}",
            )
    reports = [
        _report(customer, by_customer[customer], rule, today) for customer in sorted(by_customer)
    ]
    result = {
        "as_of": today.isoformat() if today else None,
        "rule": rule,
        "summary": _summary(reports),
        "customers": reports,
    }
    if as_json:
        print_json(result)
    else:
        _print_table(result)


def _parse_as_of(text: str | None) -> date | None:
    if text is None:
        return None
    allowed = f"expected a date such as 2026-06-30, in the years {MIN_YEAR}–{MAX_YEAR}"
    try:
        found = date.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput("--as-of", text, allowed) from None
    if not MIN_YEAR <= found.year <= MAX_YEAR:
        raise InvalidInput("--as-of", text, allowed)
    return found


def _report(
    customer: str, charges: list[Charge], rule: str | None, today: date | None
) -> dict[str, Any]:
    found = recover_anchor([c.charged for c in charges], end_of_month=rule, as_of=today)
    days = sorted(c.charged for c in charges)
    report: dict[str, Any] = {
        "customer_id": customer,
        "status": found.status,
        "reason": found.reason if isinstance(found, Unrecovered) else None,
        "charges": len(charges),
        "first_charge": days[0].isoformat(),
        "last_charge": days[-1].isoformat(),
        "anchor": None,
        "drifted": [],
        "next_renewal": None,
        "drifting_next": None,
        "extra_days": None,
    }
    if isinstance(found, RecoveredAnchor):
        report.update(_recovered(found, charges))
    return report


def _recovered(found: RecoveredAnchor, charges: list[Charge]) -> dict[str, Any]:
    row_of: dict[date, Charge] = {}
    for charge in charges:
        row_of.setdefault(charge.charged, charge)  # one charge per date (else inconsistent)
    drifting = found.drifting_next
    return {
        "anchor": {
            "day": found.day,
            "end_of_month": found.end_of_month,
            "interval_months": found.interval,
            "also_fits": list(found.also_fits),
        },
        "drifted": [
            {
                "n": d.n,
                "line": row_of[d.charged].line,
                "charged": d.charged.isoformat(),
                "expected": d.expected.isoformat(),
                "amount": _amount(row_of[d.charged]),
            }
            for d in found.drifted
        ],
        "next_renewal": found.next_renewal.isoformat(),
        "drifting_next": drifting.isoformat() if drifting else None,
        "extra_days": (found.next_renewal - drifting).days if drifting else None,
    }


def _amount(charge: Charge) -> str | None:
    return None if charge.amount is None else str(charge.amount)


def _summary(reports: list[dict[str, Any]]) -> dict[str, int]:
    summary = {"customers": len(reports)}
    for status in STATUSES:
        summary[status] = sum(1 for r in reports if r["status"] == status)
        if status == "recovered":
            summary["with_drift"] = sum(1 for r in reports if r["drifted"])
    return summary


def _print_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    summary = result["summary"]
    title = (
        f"{summary['customers']} customers: {summary['recovered']} recovered "
        f"({summary['with_drift']} with drifted charges)"
    )
    others = [s for s in STATUSES[1:] if summary[s]]
    if others:
        title += ", " + ", ".join(f"{summary[s]} {s}" for s in others)
    table = Table(title=title)
    table.add_column("customer", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("anchor")
    table.add_column("drifted (charged → expected), or why not")
    table.add_column("next renewal")
    for r in result["customers"]:
        # Customer ids come from the file: cells are plain text, never rich markup.
        customer = Text(r["customer_id"])
        if r["anchor"] is None:
            table.add_row(customer, r["status"], "", Text(r["reason"]), "")
        else:
            drifted, renewal = _drift_cells(r)
            table.add_row(customer, r["status"], _anchor_text(r["anchor"]), drifted, renewal)
    Console(highlight=False).print(table)


def _anchor_text(anchor: dict[str, Any]) -> str:
    step = (
        "monthly" if anchor["interval_months"] == 1 else f"every {anchor['interval_months']} months"
    )
    day = "last day" if anchor["end_of_month"] == "last-day" else f"day {anchor['day']}"
    text = f"{day}, {anchor['end_of_month']}, {step}"
    if anchor["also_fits"]:
        text += f" (also fits {', '.join(anchor['also_fits'])})"
    return text


def _drift_cells(r: dict[str, Any]) -> tuple[str, str]:
    drifted = ", ".join(f"{d['charged']} → {d['expected']}" for d in r["drifted"]) or "none"
    renewal = r["next_renewal"]
    if r["drifting_next"] is not None:
        extra = r["extra_days"]
        renewal += f" (drifting: {r['drifting_next']}, +{extra} day{'' if extra == 1 else 's'})"
    return drifted, renewal


__all__ = ["anchors_app", "recover_command"]
