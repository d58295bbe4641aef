"""`recoup plan`: decide whether and when to retry one failed charge, and print the plan."""

from __future__ import annotations

from typing import Annotated

import typer

from recoup.cli._app import app, print_json
from recoup.cli._policy import PolicyOption, load_policy
from recoup.dunning.outcomes import Decision, Retry, decision_as_dict, decision_kind
from recoup.dunning.planner import Failure, plan_retries
from recoup.dunning.policy import DEFAULT_PRESET
from recoup.errors import InvalidInput
from recoup.timekeeping.calendar import BusinessCalendar
from recoup.timekeeping.instants import format_local, format_utc, parse_instant
from recoup.timekeeping.zones import zone


def _country(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    code = value.strip().upper()
    try:
        BusinessCalendar(country=code)
    except InvalidInput:
        raise InvalidInput(
            "--country", value, "expected an ISO 3166-1 alpha-2 code the holidays package knows"
        ) from None
    return code


def _print_readable(decision: Decision) -> None:
    """A readable rendering for a terminal (the JSON is the stable contract)."""
    lines = [
        f"{decision.invoice}: {decision_kind(decision)}",
        f"reason: {decision.reason}",
    ]
    if isinstance(decision, Retry):
        rows = [("#", "at (UTC)", "local", "idempotency key", "job name")]
        rows += [
            (
                str(a.attempt),
                format_utc(a.at),
                format_local(a.local),
                a.idempotency_key,
                a.name,
            )
            for a in decision.attempts
        ]
        widths = [max(len(row[c]) for row in rows) for c in range(5)]
        lines += [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows
        ]
    lines.append(f"after the last failure: {decision.after_last_failure.value}")
    typer.echo("\n".join(lines))


@app.command("plan")
def plan_command(
    invoice: Annotated[str, typer.Option("--invoice", help="Invoice id, e.g. inv_1.")],
    failed_at: Annotated[
        str,
        typer.Option("--failed-at", help="Failure instant with offset, e.g. 2026-06-23T15:00:00Z."),
    ],
    timezone: Annotated[str, typer.Option("--timezone", help="Customer's IANA time zone.")],
    country: Annotated[
        str | None, typer.Option("--country", help="Customer's country (holidays), e.g. US.")
    ] = None,
    decline_code: Annotated[
        str | None, typer.Option("--decline-code", help="Gateway decline code.")
    ] = None,
    advice_code: Annotated[
        list[str] | None,
        typer.Option("--advice-code", help="Advice code (Stripe or Mastercard MAC); repeatable."),
    ] = None,
    policy: PolicyOption = DEFAULT_PRESET,
    next_renewal: Annotated[
        str | None,
        typer.Option("--next-renewal", help="Next renewal instant: no attempt at or after it."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
) -> None:
    """Plan the retries of one failed charge (nothing is scheduled)."""
    if not invoice.strip():
        raise InvalidInput("--invoice", invoice, "expected a non-empty invoice id")
    zone(timezone, field="--timezone")
    failure = Failure(
        invoice=invoice,
        failed_at=parse_instant("--failed-at", failed_at),
        timezone=timezone,
        country=_country(country),
        decline_code=decline_code or None,
        advice_codes=tuple(advice_code or ()),
        next_renewal_at=parse_instant("--next-renewal", next_renewal) if next_renewal else None,
    )
    decision = plan_retries(failure, load_policy(policy).policy)
    if as_json:
        print_json(decision_as_dict(decision))
    else:
        _print_readable(decision)
