"""Which emails a transition of an invoice calls for, and when each goes out. Pure: the
invoice, its new events and the policy in; `PlannedMessage` values out (no clock, no I/O).

The mapping (the table in the package docstring), in the order `messages_for` applies it:

1. Nothing for a cancelled (stopped) invoice, nor when the policy's `[messages]` is off.
2. Once the invoice is recovered, only its `invoice.recovered` event is written about:
   nothing after recovery (a late double charge is the merchant's business, not a dunning
   email).
3. The opening (the invoice's first event, seq 1): `invoice.retry_scheduled` or
   `invoice.awaiting_customer` → `payment_failed`, with the first attempt's date or the date
   to update the card by. An opening that exhausts at once (a hard decline) is written about
   by its `invoice.exhausted` event alone.
4. `invoice.retry_failed` → `retry_failed` with the next attempt's date; `final_warning` when
   that next attempt is the last (the email warns of the final action); nothing when no
   attempt is left and the same transition exhausts the invoice (its `exhausted` email says
   it all). With none left but the invoice waiting for the customer (a decline that needs
   them), `retry_failed` without a next date: the customer must act.
5. `invoice.recovered` → `recovered`; `invoice.exhausted` → `exhausted`.
6. Kinds the policy does not `send` are dropped.

Each email's `send_at` is its event's instant moved into the customer's local daytime
(`daytime`): never at 03:00 local. When it is sent, `still_due` says whether the invoice is
still where the email says it is (a failure email is dropped once the invoice recovered).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from recoup.dunning.invoice import ID_NAMESPACE, Invoice, InvoiceEvent, InvoiceState
from recoup.dunning.policy_messages import MessageKind, MessagePolicy
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import format_utc, require_aware
from recoup.timekeeping.zones import zone

_PROBE = timedelta(hours=1)  # zones change offset at most once in an hour
_MAX_SEGMENTS = 16  # offset changes crossed looking for the window: a few at most, in reality


@dataclass(frozen=True, kw_only=True)
class PlannedMessage:
    """One email to send: `key` names it for ever (its ledger row, job and Message-ID), so a
    transition replayed plans the same message again rather than a second one."""

    tenant: str
    kind: MessageKind
    key: str
    customer_id: str
    invoice_id: str | None
    send_at: datetime
    source: str  # the event id it answers (a renewal id for a card_expiring reminder)
    data: dict[str, Any]  # JSON-able facts for the template (see `messages_for`)

    def __post_init__(self) -> None:
        require_aware("send_at", self.send_at)


def message_key(tenant: str, source: str, kind: MessageKind | str) -> str:
    """The deterministic key of the `kind` email answering `source` (an event or a renewal)."""
    return str(uuid.uuid5(ID_NAMESPACE, f"message\x00{tenant}\x00{source}\x00{kind}"))


# ---- the local daytime window --------------------------------------------------------------


def daytime(at: datetime, timezone: str, start: time, end: time) -> datetime:
    """The first instant at or after `at` whose wall time in `timezone` lies in [start, end),
    in UTC: `at` itself when it is inside. Exact across DST: a window that opens inside a
    spring-forward gap opens at the first instant after the gap (the earliest one the local
    clock shows inside the window), and a fall-back that puts the clock back inside the window
    is taken at once. `end` must be after `start` on the same day."""
    require_aware("at", at)
    if not start < end:
        raise InvalidInput("window_end", end.isoformat(), f"expected a time after {start}")
    tz = zone(timezone)
    t = at.astimezone(UTC)
    for _ in range(_MAX_SEGMENTS):
        offset = _offset(tz, t)
        wall = (t + offset).replace(tzinfo=None)
        if start <= wall.time() < end:
            return t
        day = wall.date() if wall.time() < start else wall.date() + timedelta(days=1)
        opening = _as_utc(day, start) - offset  # the window's start, if the offset holds
        change = _first_change(tz, t, offset, until=opening)
        if change is None:
            return opening
        t = change  # the offset changes first: read the wall clock again from there
    raise AssertionError(f"no daytime window found after {at} in {timezone}")  # pragma: no cover


def _offset(tz: ZoneInfo, instant: datetime) -> timedelta:
    offset = instant.astimezone(tz).utcoffset()
    assert offset is not None  # a ZoneInfo always has one
    return offset


def _as_utc(day: date, at: time) -> datetime:
    return datetime.combine(day, at, tzinfo=UTC)


def _first_change(
    tz: ZoneInfo, after: datetime, offset: timedelta, *, until: datetime
) -> datetime | None:
    """The first instant in (after, until] whose offset is not `offset`, to the second (zones
    change on whole seconds); None when the offset holds throughout."""
    low = after
    while low < until:
        high = min(low + _PROBE, until)
        if _offset(tz, high) != offset:
            lo, hi = math.floor(low.timestamp()), math.ceil(high.timestamp())
            while hi - lo > 1:  # offset(lo) == offset, offset(hi) != offset
                mid = (lo + hi) // 2
                if _offset(tz, datetime.fromtimestamp(mid, UTC)) == offset:
                    lo = mid
                else:
                    hi = mid
            return max(datetime.fromtimestamp(hi, UTC), after)
        low = high
    return None


# ---- events → messages ---------------------------------------------------------------------


def messages_for(
    invoice: Invoice, events: Sequence[InvoiceEvent], policy: MessagePolicy
) -> list[PlannedMessage]:
    """The emails that a transition's `events` call for, `invoice` being the invoice after it
    (rules in the module docstring). `data` holds what the templates need: amount (minor
    units), currency, invoice_id, customer_id, timezone, final_action, event, event_at, and per
    kind attempt, attempts_left, next_attempt_at (ISO UTC or None), respond_by, attempts_made,
    recovered_by, access (when the event has it)."""
    if not policy.enabled or invoice.state is InvoiceState.CANCELLED:
        return []
    exhausting = any(e.type == "invoice.exhausted" for e in events)
    planned: list[PlannedMessage] = []
    for event in events:
        if invoice.state is InvoiceState.RECOVERED and event.type != "invoice.recovered":
            continue
        found = _kind_of(event, exhausting=exhausting)
        if found is None or not policy.sends(found[0]):
            continue
        kind, facts = found
        planned.append(
            PlannedMessage(
                tenant=invoice.tenant,
                kind=kind,
                key=message_key(invoice.tenant, event.id, kind),
                customer_id=invoice.customer_id,
                invoice_id=invoice.invoice_id,
                send_at=daytime(event.at, invoice.timezone, policy.window_start, policy.window_end),
                source=event.id,
                data={**_common(invoice, event), **facts},
            )
        )
    return planned


def _kind_of(event: InvoiceEvent, *, exhausting: bool) -> tuple[MessageKind, dict[str, Any]] | None:
    data = event.data
    match event.type:
        case "invoice.retry_scheduled" if event.seq == 1:
            attempts = data.get("attempts") or []
            return MessageKind.PAYMENT_FAILED, {
                "attempt": None,
                "attempts_left": len(attempts),
                "next_attempt_at": attempts[0]["at"] if attempts else None,
                "respond_by": None,
            }
        case "invoice.awaiting_customer" if event.seq == 1:
            return MessageKind.PAYMENT_FAILED, {
                "attempt": None,
                "attempts_left": 0,
                "next_attempt_at": None,
                "respond_by": data.get("respond_by"),
            }
        case "invoice.retry_failed":
            left = int(data.get("attempts_left") or 0)
            if left == 0 and exhausting:
                return None
            kind = MessageKind.FINAL_WARNING if left == 1 else MessageKind.RETRY_FAILED
            return kind, {
                "attempt": data.get("attempt"),
                "attempts_left": left,
                "next_attempt_at": data.get("next_attempt_at"),
                "respond_by": None,
            }
        case "invoice.recovered":
            return MessageKind.RECOVERED, {
                "attempt": data.get("attempt"),
                "recovered_by": data.get("by"),
            }
        case "invoice.exhausted":
            return MessageKind.EXHAUSTED, {"attempts_made": data.get("attempts_made")}
        case _:
            return None


def _common(invoice: Invoice, event: InvoiceEvent) -> dict[str, Any]:
    common: dict[str, Any] = {
        "invoice_id": invoice.invoice_id,
        "customer_id": invoice.customer_id,
        "amount": invoice.amount,
        "currency": invoice.currency,
        "timezone": invoice.timezone,
        "final_action": invoice.final_action,
        "event": event.type,
        "event_at": format_utc(event.at),
    }
    if "access" in event.data:  # the customer's access state, when the lifecycle gives it
        common["access"] = event.data["access"]
    return common


def still_due(planned: PlannedMessage, invoice: Invoice | None) -> bool:
    """Whether `planned` still tells the truth when its turn comes (an email that waited for
    the morning, a job retried for hours): the invoice (read again by the sender) must still
    be where the email says it is. A failure, retry or warning email goes only while the
    invoice is retrying or waiting for the customer; `exhausted` only while exhausted (a card
    update may have reopened it); `recovered` only once recovered. A card_expiring reminder
    has no invoice: its renewal's own cancellation decides."""
    if planned.kind is MessageKind.CARD_EXPIRING:
        return True
    if invoice is None or invoice.invoice_id != planned.invoice_id:
        return False
    match planned.kind:
        case MessageKind.PAYMENT_FAILED | MessageKind.RETRY_FAILED | MessageKind.FINAL_WARNING:
            return invoice.state in (InvoiceState.RETRYING, InvoiceState.AWAITING_CUSTOMER)
        case MessageKind.EXHAUSTED:
            return invoice.state is InvoiceState.EXHAUSTED
        case MessageKind.RECOVERED:
            return invoice.state is InvoiceState.RECOVERED
    return False  # pragma: no cover - every kind is matched above


# ---- reminders before a renewal ------------------------------------------------------------


def card_expiry_reminder(
    *,
    tenant: str,
    renewal_id: str,
    customer_id: str,
    renews_at: datetime,
    timezone: str,
    exp_month: int,
    exp_year: int,
    policy: MessagePolicy,
    data: dict[str, Any],
) -> PlannedMessage | None:
    """The `card_expiring` reminder for a renewal, or None when the card is still valid on the
    renewal's local date (a card is good through the last day of its expiry month), or the
    policy sends no such reminder. It goes out `card_expiry_days_before` days before the
    renewal, inside the daytime window; `data` (amount, currency, …) is kept and completed."""
    require_aware("renews_at", renews_at)
    if isinstance(exp_month, bool) or not isinstance(exp_month, int) or not 1 <= exp_month <= 12:
        raise InvalidInput("card.exp_month", exp_month, "expected a month from 1 to 12")
    if isinstance(exp_year, bool) or not isinstance(exp_year, int) or not 2000 <= exp_year <= 2200:
        raise InvalidInput("card.exp_year", exp_year, "expected a four-digit year")
    if not policy.sends(MessageKind.CARD_EXPIRING):
        return None
    renews_local = renews_at.astimezone(zone(timezone))
    if (renews_local.year, renews_local.month) <= (exp_year, exp_month):
        return None
    due = renews_at - timedelta(days=policy.card_expiry_days_before)
    kind = MessageKind.CARD_EXPIRING
    return PlannedMessage(
        tenant=tenant,
        kind=kind,
        key=message_key(tenant, renewal_id, kind),
        customer_id=customer_id,
        invoice_id=None,
        send_at=daytime(due, timezone, policy.window_start, policy.window_end),
        source=renewal_id,
        data={
            **data,
            "customer_id": customer_id,
            "renewal_id": renewal_id,
            "renews_at": format_utc(renews_at),
            "timezone": timezone,
            "exp_month": exp_month,
            "exp_year": exp_year,
        },
    )


__all__ = [
    "PlannedMessage",
    "card_expiry_reminder",
    "daytime",
    "message_key",
    "messages_for",
    "still_due",
]
