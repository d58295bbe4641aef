"""Which emails a transition calls for and when: each rule of `planning` pinned by a case on
the real lifecycle, and `daytime` as a property across zones that move their clocks."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.dunning.invoice import Invoice
from recoup.dunning.lifecycle import (
    AttemptReported,
    DeadlinePassed,
    DunningStopped,
    Message,
    Opening,
    PaidOutOfBand,
    Planning,
    Transition,
    open_invoice,
    transition,
)
from recoup.dunning.planner import plan_retries
from recoup.dunning.policy import parse_policy, preset
from recoup.dunning.policy_messages import MessagePolicy
from recoup.errors import InvalidInput
from recoup.messages.kinds import REMINDER_KINDS, REQUIRED_KINDS, MessageKind
from recoup.messages.planning import (
    PlannedMessage,
    card_expiry_reminder,
    daytime,
    message_key,
    messages_for,
    still_due,
)
from tests.support import charge_failure

POLICY = preset("business-days")  # four attempts
PLANNING = Planning(policy=POLICY)
MESSAGES = MessagePolicy()
ZONE = "America/Chicago"
FAILED_AT = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)  # a Tuesday, 10:00 in Chicago


def opening(decline: str = "insufficient_funds", *, at: datetime = FAILED_AT) -> Opening:
    return Opening(
        tenant="acme",
        failure=charge_failure(failed_at=at, timezone=ZONE, decline_code=decline),
        charge_url="https://billing.example/charge",
        policy=POLICY,
    )


class Run:
    """The lifecycle as a store drives it, with the emails each transition plans."""

    def __init__(self, decline: str = "insufficient_funds", *, at: datetime = FAILED_AT) -> None:
        o = opening(decline, at=at)
        self.invoice, first = open_invoice(o, plan_retries(o.failure.for_planner(), POLICY), now=at)
        self.seq = len(first.events)
        self.planned = messages_for(self.invoice, first.events, MESSAGES)

    def send(self, message: Message) -> list[PlannedMessage]:
        t: Transition | None = transition(
            self.invoice, message, PLANNING, seq=self.seq, now=message.at
        )
        if t is None:
            return []
        self.invoice, self.seq = t.invoice, self.seq + len(t.events)
        new = messages_for(t.invoice, t.events, MESSAGES)
        self.planned.extend(new)
        return new

    def fail(self, n: int, decline: str = "insufficient_funds") -> list[PlannedMessage]:
        attempt = self.invoice.attempt(n)
        assert attempt is not None
        return self.send(
            AttemptReported(attempt=n, outcome="failed", decline_code=decline, at=attempt.at)
        )

    def succeed(self, n: int) -> list[PlannedMessage]:
        attempt = self.invoice.attempt(n)
        assert attempt is not None
        return self.send(AttemptReported(attempt=n, outcome="succeeded", at=attempt.at))

    def kinds(self) -> list[MessageKind]:
        return [p.kind for p in self.planned]


def test_kinds_split_into_reminders_and_required_notices() -> None:
    assert REMINDER_KINDS == {MessageKind.RETRY_FAILED, MessageKind.CARD_EXPIRING}
    assert REQUIRED_KINDS == {
        MessageKind.PAYMENT_FAILED,
        MessageKind.FINAL_WARNING,
        MessageKind.RECOVERED,
        MessageKind.EXHAUSTED,
    }
    assert MessageKind.RETRY_FAILED.is_reminder and not MessageKind.EXHAUSTED.is_reminder


def test_a_recovery_on_attempt_three_plans_failure_two_retries_and_recovery_once_each() -> None:
    run = Run()
    run.fail(1)
    run.fail(2)
    run.succeed(3)
    assert run.kinds() == [
        MessageKind.PAYMENT_FAILED,
        MessageKind.RETRY_FAILED,
        MessageKind.RETRY_FAILED,
        MessageKind.RECOVERED,
    ]
    assert len({p.key for p in run.planned}) == 4
    # A duplicate report of the success changes nothing, so plans nothing.
    assert run.succeed(3) == []
    # Nor does a late double charge after recovery.
    assert run.send(PaidOutOfBand(at=FAILED_AT + timedelta(days=20))) == []


def test_the_failure_email_names_the_first_attempt_and_the_retry_email_the_next() -> None:
    run = Run()
    (failed,) = run.planned
    first = run.invoice.attempt(1)
    assert first is not None
    assert failed.data["next_attempt_at"] == first.at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert failed.data["attempts_left"] == 4
    assert failed.data | {"amount": 1999, "currency": "usd", "timezone": ZONE} == failed.data
    assert failed.invoice_id == "inv_1" and failed.customer_id == "cus_1"
    (retry,) = run.fail(1)
    second = run.invoice.attempt(2)
    assert second is not None
    assert retry.data["attempt"] == 1
    assert retry.data["attempts_left"] == 3
    assert retry.data["next_attempt_at"] == second.at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert retry.source != failed.source


def test_the_retry_before_the_last_attempt_is_a_final_warning_then_exhausted() -> None:
    run = Run()
    for n in (1, 2, 3, 4):
        run.fail(n)
    assert run.kinds() == [
        MessageKind.PAYMENT_FAILED,
        MessageKind.RETRY_FAILED,
        MessageKind.RETRY_FAILED,
        MessageKind.FINAL_WARNING,  # attempt 3 failed; attempt 4 is the last
        MessageKind.EXHAUSTED,  # attempt 4's retry_failed is said by the exhausted email
    ]
    warning, exhausted = run.planned[-2:]
    assert warning.data["attempts_left"] == 1 and warning.data["final_action"] == "pause_access"
    assert exhausted.data["attempts_made"] == 4


def test_a_hard_decline_opening_sends_the_exhausted_email_alone() -> None:
    run = Run("stolen_card")
    assert run.kinds() == [MessageKind.EXHAUSTED]


def test_a_decline_that_needs_the_customer_asks_them_to_act_by_the_deadline() -> None:
    run = Run("expired_card")
    (failed,) = run.planned
    assert failed.kind is MessageKind.PAYMENT_FAILED
    assert failed.data["next_attempt_at"] is None
    assert failed.data["respond_by"] == "2026-07-14T15:00:00Z"
    run.send(DeadlinePassed(at=FAILED_AT + timedelta(days=21)))
    assert run.kinds() == [MessageKind.PAYMENT_FAILED, MessageKind.EXHAUSTED]


def test_a_retry_that_turns_into_waiting_for_the_customer_says_so_without_a_date() -> None:
    run = Run()
    (retry,) = run.fail(1, "expired_card")
    assert retry.kind is MessageKind.RETRY_FAILED
    assert retry.data["attempts_left"] == 0 and retry.data["next_attempt_at"] is None


def test_a_stopped_invoice_gets_nothing() -> None:
    run = Run()
    assert run.send(DunningStopped(at=FAILED_AT + timedelta(days=1), reason="voided")) == []


def test_kinds_the_policy_leaves_out_and_a_disabled_policy_plan_nothing() -> None:
    o = opening()
    invoice, first = open_invoice(o, plan_retries(o.failure.for_planner(), POLICY), now=FAILED_AT)
    only_recovery = MessagePolicy(send=frozenset({MessageKind.RECOVERED}))
    assert messages_for(invoice, first.events, only_recovery) == []
    assert messages_for(invoice, first.events, MessagePolicy(enabled=False)) == []
    assert len(messages_for(invoice, first.events, MESSAGES)) == 1


def test_the_same_events_plan_the_same_keys() -> None:
    a, b = Run(), Run()
    assert [p.key for p in a.planned] == [p.key for p in b.planned]
    (p,) = a.planned
    assert p.key == message_key("acme", p.source, "payment_failed")
    assert p.key != message_key("acme", p.source, "retry_failed")
    assert p.key != message_key("other", p.source, "payment_failed")


def test_a_failure_at_night_is_written_about_when_the_window_opens() -> None:
    night = datetime(2026, 6, 24, 8, 0, tzinfo=UTC)  # 03:00 in Chicago
    run = Run(at=night)
    (failed,) = run.planned
    assert failed.send_at == datetime(2026, 6, 24, 13, 0, tzinfo=UTC)  # 08:00 CDT
    # Inside the window, the email goes out at the event.
    assert Run().planned[0].send_at == FAILED_AT


def test_the_access_state_is_passed_on_when_the_event_has_it() -> None:
    o = opening()
    invoice, first = open_invoice(o, plan_retries(o.failure.for_planner(), POLICY), now=FAILED_AT)
    events = [replace(e, data={**e.data, "access": "grace"}) for e in first.events]
    (p,) = messages_for(invoice, events, MESSAGES)
    assert p.data["access"] == "grace"


# ---- daytime ------------------------------------------------------------------------------

DST_ZONES = [
    "America/Chicago",
    "Europe/Berlin",
    "Europe/London",
    "Australia/Lord_Howe",  # 30-minute DST
    "America/Santiago",  # changes at 00:00 / 24:00
    "America/Havana",  # changes at 00:00 → 01:00
    "Asia/Beirut",  # changes at 00:00
    "Pacific/Chatham",
    "America/St_Johns",
    "UTC",
]


def _inside(t: datetime, tz: ZoneInfo, start: time, end: time) -> bool:
    return start <= t.astimezone(tz).time() < end


def _first_inside_by_minutes(at: datetime, tz: ZoneInfo, start: time, end: time) -> datetime:
    """An independent answer: walk the minutes from `at` until the wall clock is inside."""
    if _inside(at, tz, start, end):
        return at
    t = at.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while not _inside(t, tz, start, end):
        t += timedelta(minutes=1)
    return t


minutes = st.integers(0, 24 * 60 - 1)


@st.composite
def windows(draw: st.DrawFn) -> tuple[time, time]:
    a = draw(minutes)
    b = draw(minutes.filter(lambda m: m != a))
    lo, hi = sorted((a, b))
    return time(lo // 60, lo % 60), time(hi // 60, hi % 60)


@settings(max_examples=150, deadline=None)
@given(
    at=st.datetimes(
        min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)
    ),
    name=st.sampled_from(DST_ZONES),
    window=windows(),
)
def test_daytime_is_the_first_instant_inside_the_local_window(
    at: datetime, name: str, window: tuple[time, time]
) -> None:
    start, end = window
    tz = ZoneInfo(name)
    got = daytime(at, name, start, end)
    assert got >= at
    assert _inside(got, tz, start, end)
    assert got == _first_inside_by_minutes(at, tz, start, end)


def test_daytime_near_transitions_is_exact_to_the_minute() -> None:
    # Around every change of 2026 in these zones, at each quarter hour: the property above,
    # where hypothesis rarely lands.
    for name in DST_ZONES:
        tz = ZoneInfo(name)
        t = datetime(2026, 1, 1, tzinfo=UTC)
        changes = []
        while t.year == 2026:
            nxt = t + timedelta(hours=1)
            if t.astimezone(tz).utcoffset() != nxt.astimezone(tz).utcoffset():
                changes.append(nxt)
            t = nxt
        for change in changes:
            for window in [
                (time(0, 0), time(1, 30)),
                (time(1, 45), time(3, 0)),
                (time(8), time(20)),
            ]:
                for k in range(-8, 8):
                    at = change + timedelta(minutes=15 * k)
                    assert daytime(at, name, *window) == _first_inside_by_minutes(at, tz, *window)


def test_a_window_that_opens_in_a_spring_forward_gap_opens_when_the_gap_ends() -> None:
    # Berlin 2026-03-29: 02:00 CET → 03:00 CEST. A 02:30 opening opens at 03:00 local.
    at = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)  # 00:00 CET
    assert daytime(at, "Europe/Berlin", time(2, 30), time(5)) == datetime(
        2026, 3, 29, 1, 0, tzinfo=UTC
    )


def test_daytime_refuses_an_empty_window_and_a_naive_instant() -> None:
    with pytest.raises(InvalidInput):
        daytime(FAILED_AT, ZONE, time(20), time(8))
    with pytest.raises(InvalidInput):
        daytime(datetime(2026, 1, 1), ZONE, time(8), time(20))


# ---- card expiry reminders ------------------------------------------------------------------


def _reminder(exp_month: int, exp_year: int, **kw: object) -> PlannedMessage | None:
    args: dict[str, object] = {
        "tenant": "acme",
        "renewal_id": "ren_1",
        "customer_id": "cus_1",
        "renews_at": datetime(2026, 8, 1, 5, 0, tzinfo=UTC),  # Aug 1, 00:00 in Chicago
        "timezone": ZONE,
        "exp_month": exp_month,
        "exp_year": exp_year,
        "policy": MESSAGES,
        "data": {"amount": 1999, "currency": "usd"},
    } | kw
    return card_expiry_reminder(**args)  # type: ignore[arg-type]


def test_a_card_that_expires_before_the_renewal_gets_a_reminder_a_week_before() -> None:
    p = _reminder(7, 2026)
    assert p is not None
    assert p.kind is MessageKind.CARD_EXPIRING and p.invoice_id is None
    # Jul 25, 00:00 local → the window opens at 08:00 CDT.
    assert p.send_at == datetime(2026, 7, 25, 13, 0, tzinfo=UTC)
    assert p.key == message_key("acme", "ren_1", MessageKind.CARD_EXPIRING)
    assert p.data["amount"] == 1999 and p.data["exp_month"] == 7


def test_a_card_valid_through_the_renewal_month_gets_none() -> None:
    assert _reminder(8, 2026) is None
    assert _reminder(1, 2027) is None
    # 2026-08-01T03:00Z is still July 31 in Chicago: a card ending in July still covers it.
    assert _reminder(7, 2026, renews_at=datetime(2026, 8, 1, 3, 0, tzinfo=UTC)) is None


def test_reminders_follow_the_policy() -> None:
    assert _reminder(7, 2026, policy=MessagePolicy(enabled=False)) is None
    no_reminders = MessagePolicy(send=frozenset({MessageKind.RECOVERED}))
    assert _reminder(7, 2026, policy=no_reminders) is None
    p = _reminder(7, 2026, policy=MessagePolicy(card_expiry_days_before=3))
    assert p is not None and p.send_at == datetime(2026, 7, 29, 13, 0, tzinfo=UTC)


def test_a_bad_expiry_names_the_field() -> None:
    with pytest.raises(InvalidInput) as exc:
        _reminder(13, 2026)
    assert exc.value.field == "card.exp_month"


def test_policy_messages_reach_the_planning() -> None:
    policy = parse_policy('gaps = [{ days = 1 }]\n[messages]\nwindow_start = "09:00"\n')
    assert policy.messages.window_start == time(9)


# ---- still due at send time ---------------------------------------------------------------


def test_a_failure_email_waiting_for_the_morning_is_dropped_once_the_invoice_recovered() -> None:
    night = datetime(2026, 6, 24, 8, 0, tzinfo=UTC)  # 03:00 in Chicago: sent at 08:00
    run = Run(at=night)
    (failed,) = run.planned
    assert still_due(failed, run.invoice)
    run.send(PaidOutOfBand(at=night + timedelta(hours=2)))  # paid at 05:00 local
    (recovered,) = run.planned[1:]
    assert not still_due(failed, run.invoice)
    assert still_due(recovered, run.invoice)


def test_still_due_follows_each_kind_to_its_state() -> None:
    run = Run()
    for n in (1, 2, 3, 4):
        run.fail(n)
    *earlier, exhausted = run.planned
    assert still_due(exhausted, run.invoice)
    assert not any(still_due(p, run.invoice) for p in earlier)  # the invoice moved on
    assert not still_due(exhausted, None)  # no invoice to speak of
    other: Invoice = replace(run.invoice, invoice_id="inv_2")
    assert not still_due(exhausted, other)
    reminder = _reminder(7, 2026)
    assert reminder is not None and still_due(reminder, None)
