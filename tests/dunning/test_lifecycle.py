"""The invoice lifecycle as a pure state machine: each rule pinned by a case, and a property
over any interleaving of duplicate outcomes, payments and card updates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.dunning.invoice import AttemptState, Invoice, InvoiceState
from recoup.dunning.lifecycle import (
    AttemptReported,
    CancelAttempt,
    DeadlinePassed,
    DunningStopped,
    Message,
    Opening,
    PaidOutOfBand,
    PaymentMethodUpdated,
    Planning,
    ScheduleAttempt,
    ScheduleDeadline,
    Transition,
    open_invoice,
    transition,
)
from recoup.dunning.planner import plan_retries
from recoup.dunning.policy import preset
from recoup.errors import NotFound
from recoup.timekeeping.instants import format_utc
from tests.support import charge_failure

POLICY = preset("business-days")
PLANNING = Planning(policy=POLICY)
FAILED_AT = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)  # a Tuesday


def opening(decline: str | None = "insufficient_funds", advice: str | None = None) -> Opening:
    return Opening(
        tenant="acme",
        failure=charge_failure(failed_at=FAILED_AT, decline_code=decline, advice_code=advice),
        charge_url="https://billing.example/charge",
        policy=POLICY,
    )


def opened(decline: str | None = "insufficient_funds") -> tuple[Invoice, Transition]:
    o = opening(decline)
    return open_invoice(o, plan_retries(o.failure.for_planner(), POLICY), now=FAILED_AT)


class Run:
    """Feeds messages through `transition`, keeping the event count as a store would."""

    def __init__(self, invoice: Invoice, first: Transition) -> None:
        self.invoice = invoice
        self.events = list(first.events)
        self.commands = list(first.commands)

    def send(self, message: Message) -> Transition | None:
        t = transition(self.invoice, message, PLANNING, seq=len(self.events), now=message.at)
        if t is not None:
            assert t.invoice.version == self.invoice.version + 1
            self.invoice = t.invoice
            self.events.extend(t.events)
            self.commands.extend(t.commands)
        return t

    def types(self) -> list[str]:
        return [e.type for e in self.events]


def at(days: float) -> datetime:
    return FAILED_AT + timedelta(days=days)


def test_a_soft_decline_opens_retrying_with_one_scheduled_job_per_planned_attempt() -> None:
    invoice, first = opened()
    assert invoice.state is InvoiceState.RETRYING
    assert [a.attempt for a in invoice.attempts] == [1, 2, 3, 4]
    assert all(a.state is AttemptState.SCHEDULED for a in invoice.attempts)
    scheduled = [c.attempt.attempt for c in first.commands if isinstance(c, ScheduleAttempt)]
    assert scheduled == [1, 2, 3, 4]
    assert [e.type for e in first.events] == ["invoice.retry_scheduled"]
    assert len({a.job_id for a in invoice.attempts}) == 4


def test_a_hard_decline_opens_exhausted_with_the_final_action() -> None:
    invoice, first = opened("stolen_card")
    assert invoice.state is InvoiceState.EXHAUSTED
    assert invoice.attempts == ()
    (event,) = first.events
    assert event.type == "invoice.exhausted"
    assert event.data["final_action"] == "pause_access"


def test_an_expired_card_waits_for_the_customer_until_the_deadline() -> None:
    invoice, first = opened("expired_card")
    assert invoice.state is InvoiceState.AWAITING_CUSTOMER
    (deadline,) = [c for c in first.commands if isinstance(c, ScheduleDeadline)]
    assert deadline.at == FAILED_AT + timedelta(days=POLICY.max_duration_days)
    run = Run(invoice, first)
    run.send(DeadlinePassed(at=deadline.at))
    assert run.invoice.state is InvoiceState.EXHAUSTED
    assert run.types() == ["invoice.awaiting_customer", "invoice.exhausted"]


def test_an_expired_card_then_a_card_update_gets_one_prompt_retry() -> None:
    run = Run(*opened("expired_card"))
    run.send(PaymentMethodUpdated(at=at(2)))
    assert run.invoice.state is InvoiceState.RETRYING
    (attempt,) = run.invoice.attempts
    assert attempt.at == at(2) and attempt.state is AttemptState.SCHEDULED
    # The deadline that then comes changes nothing: the invoice is retrying.
    assert run.send(DeadlinePassed(at=at(21))) is None


def test_success_recovers_and_cancels_every_open_attempt_once() -> None:
    run = Run(*opened())
    run.send(
        AttemptReported(attempt=1, outcome="failed", decline_code="insufficient_funds", at=at(1))
    )
    run.send(AttemptReported(attempt=2, outcome="succeeded", at=at(6)))
    assert run.invoice.state is InvoiceState.RECOVERED
    assert run.invoice.recovered_by == "attempt:2"
    assert run.invoice.reason == "recovered by attempt 2"  # names it: nobody looks it up
    states = [a.state for a in run.invoice.attempts]
    assert states == [
        AttemptState.FAILED,
        AttemptState.SUCCEEDED,
        AttemptState.CANCELLED,
        AttemptState.CANCELLED,
    ]
    cancels = [c.attempt.attempt for c in run.commands if isinstance(c, CancelAttempt)]
    assert cancels == [3, 4]
    # The same success again, and a late copy of attempt 1's failure: nothing changes.
    assert run.send(AttemptReported(attempt=2, outcome="succeeded", at=at(6.1))) is None
    assert run.send(AttemptReported(attempt=1, outcome="failed", at=at(6.2))) is None
    assert run.types().count("invoice.recovered") == 1


def test_a_hard_decline_on_attempt_two_cancels_attempts_three_and_four() -> None:
    run = Run(*opened())
    run.send(
        AttemptReported(attempt=1, outcome="failed", decline_code="insufficient_funds", at=at(1))
    )
    run.send(AttemptReported(attempt=2, outcome="failed", decline_code="stolen_card", at=at(6)))
    assert run.invoice.state is InvoiceState.EXHAUSTED
    assert [a.state for a in run.invoice.attempts][2:] == [AttemptState.CANCELLED] * 2
    assert run.types()[-2:] == ["invoice.retry_failed", "invoice.exhausted"]
    assert run.events[-1].data["final_action"] == "pause_access"


def test_the_last_failure_exhausts_once_and_says_access_will_pause() -> None:
    run = Run(*opened())
    for n in (1, 2, 3, 4):
        run.send(
            AttemptReported(
                attempt=n, outcome="failed", decline_code="insufficient_funds", at=at(3 * n)
            )
        )
    assert run.invoice.state is InvoiceState.EXHAUSTED
    failed = [e for e in run.events if e.type == "invoice.retry_failed"]
    assert [e.data["attempts_left"] for e in failed] == [3, 2, 1, 0]
    assert [e.data["access_will_pause"] for e in failed] == [False, False, False, True]
    assert failed[0].data["next_attempt_at"] is not None
    assert run.types().count("invoice.exhausted") == 1


def test_an_advice_code_on_a_retry_replans_the_rest_later() -> None:
    run = Run(*opened())
    before = run.invoice.attempts
    run.send(
        AttemptReported(
            attempt=1,
            outcome="failed",
            decline_code="insufficient_funds",
            advice_code="try_again_later",
            at=at(1),
        )
    )
    assert run.invoice.state is InvoiceState.RETRYING
    numbers = [a.attempt for a in run.invoice.attempts]
    assert numbers[:4] == [1, 2, 3, 4] and len(numbers) > 4  # never reused: 5, 6, …
    assert all(a.state is AttemptState.CANCELLED for a in run.invoice.attempts[1:4])
    assert run.invoice.attempts[4].at > before[0].at
    # Bounded by the policy's gaps: attempts that ran or stand do not exceed them.
    live = [a for a in run.invoice.attempts if a.state is not AttemptState.CANCELLED]
    assert len(live) <= len(POLICY.gaps)
    # The failure's event comes first and already tells what the re-plan decided.
    failed = next(e for e in run.events if e.type == "invoice.retry_failed")
    assert run.types()[-2:] == ["invoice.retry_failed", "invoice.retry_scheduled"]
    scheduled = [a for a in run.invoice.attempts if a.state is AttemptState.SCHEDULED]
    assert failed.data["invoice_id"] == "inv_1"
    assert failed.data["attempts_left"] == len(scheduled)
    assert failed.data["next_attempt_at"] == format_utc(scheduled[0].at)
    assert failed.data["access_will_pause"] is False


def test_paid_out_of_band_cancels_and_a_charge_that_lands_after_is_a_double_charge() -> None:
    run = Run(*opened())
    run.send(PaidOutOfBand(at=at(0.5)))
    assert run.invoice.state is InvoiceState.RECOVERED
    assert run.invoice.recovered_by == "paid_out_of_band"
    assert run.send(PaidOutOfBand(at=at(0.6))) is None
    run.send(AttemptReported(attempt=1, outcome="succeeded", at=at(1)))
    assert run.types()[-1] == "invoice.double_charged"
    assert run.send(AttemptReported(attempt=1, outcome="succeeded", at=at(1.1))) is None
    assert run.types().count("invoice.double_charged") == 1


def test_pending_keeps_the_attempt_open_until_reconciled() -> None:
    run = Run(*opened())
    run.send(AttemptReported(attempt=1, outcome="pending", at=at(1)))
    assert run.invoice.attempt(1).state is AttemptState.PENDING  # type: ignore[union-attr]
    assert run.send(AttemptReported(attempt=1, outcome="pending", at=at(1.01))) is None
    run.send(AttemptReported(attempt=1, outcome="succeeded", at=at(1.02)))
    assert run.invoice.state is InvoiceState.RECOVERED


def test_already_handled_means_the_charge_side_holds_it_settled() -> None:
    run = Run(*opened())
    run.send(AttemptReported(attempt=1, outcome="already_handled", at=at(1)))
    assert run.invoice.state is InvoiceState.RECOVERED
    assert run.invoice.recovered_by == "charge_endpoint"


def test_the_charge_behind_already_handled_is_credited_not_called_a_double_charge() -> None:
    # Found by the chaos run: two attempts of one invoice ran together; the endpoint charged
    # one and answered `already_handled` to the other, whose report came first.
    run = Run(*opened())
    run.send(AttemptReported(attempt=2, outcome="already_handled", at=at(1)))
    assert run.invoice.recovered_by == "charge_endpoint"
    run.send(AttemptReported(attempt=1, outcome="succeeded", at=at(1.01)))
    assert run.invoice.state is InvoiceState.RECOVERED
    assert run.invoice.recovered_by == "attempt:1"
    assert run.invoice.attempt(1).state is AttemptState.SUCCEEDED  # type: ignore[union-attr]
    assert run.types()[-1] == "note.recovery_credited"
    assert "invoice.double_charged" not in run.types()
    # A second success is a second charge.
    run.send(AttemptReported(attempt=3, outcome="succeeded", at=at(1.02)))
    assert run.types()[-1] == "invoice.double_charged"
    assert run.invoice.recovered_by == "attempt:1"


def test_a_stop_cancels_every_open_attempt_and_is_not_a_recovery() -> None:
    run = Run(*opened())
    scheduled = [a.attempt for a in run.invoice.attempts]
    t = run.send(DunningStopped(at=at(0.5), reason="subscription_deleted"))
    assert t is not None
    assert run.invoice.state is InvoiceState.CANCELLED
    assert run.invoice.recovered_by is None
    assert run.invoice.state.is_final and not run.invoice.state.is_judged
    assert [c.attempt.attempt for c in t.commands if isinstance(c, CancelAttempt)] == scheduled
    stopped = run.events[-1]
    assert stopped.type == "invoice.dunning_cancelled"
    assert stopped.data["reason"] == "subscription_deleted"
    assert stopped.data["cancelled_attempts"] == scheduled
    # A second stop, a card update, a deadline: nothing changes, nothing is planned.
    assert run.send(DunningStopped(at=at(0.6), reason="operator")) is None
    assert run.send(PaymentMethodUpdated(at=at(0.7))) is None
    assert run.send(DeadlinePassed(at=at(0.8))) is None


def test_a_charge_that_was_in_flight_at_a_stop_is_recorded_for_a_refund() -> None:
    run = Run(*opened())
    run.send(AttemptReported(attempt=1, outcome="pending", at=at(1)))
    run.send(DunningStopped(at=at(1.1), reason="subscription_deleted"))
    run.send(AttemptReported(attempt=1, outcome="succeeded", at=at(1.2)))
    assert run.invoice.state is InvoiceState.CANCELLED
    assert run.invoice.attempt(1).state is AttemptState.SUCCEEDED  # type: ignore[union-attr]
    assert run.types()[-1] == "invoice.charged_after_stop"
    assert "invoice.double_charged" not in run.types()


def test_closed_by_the_charge_side_stops_without_a_recovery() -> None:
    run = Run(*opened())
    run.send(AttemptReported(attempt=1, outcome="closed", at=at(1), detail="invoice void"))
    assert run.invoice.state is InvoiceState.CANCELLED
    assert run.invoice.attempt(1).state is AttemptState.CANCELLED  # type: ignore[union-attr]
    assert "invoice.recovered" not in run.types()
    assert run.types()[-2:] == ["note.closed_by_charge_side", "invoice.dunning_cancelled"]
    # Paid after all (another way): that is a recovery.
    run.send(PaidOutOfBand(at=at(2)))
    assert run.invoice.state is InvoiceState.RECOVERED


def test_a_stop_needs_a_reason() -> None:
    from recoup.errors import InvalidInput

    with pytest.raises(InvalidInput, match="reason"):
        DunningStopped(at=at(1), reason=" ")


def test_an_unknown_attempt_is_not_found() -> None:
    run = Run(*opened())
    with pytest.raises(NotFound, match="attempt 9"):
        run.send(AttemptReported(attempt=9, outcome="failed", at=at(1)))


def test_a_card_update_while_retrying_replans_with_a_prompt_attempt() -> None:
    run = Run(*opened())
    run.send(
        AttemptReported(attempt=1, outcome="failed", decline_code="insufficient_funds", at=at(1))
    )
    run.send(PaymentMethodUpdated(at=at(2)))
    live = [a for a in run.invoice.attempts if a.state is AttemptState.SCHEDULED]
    assert live[0].at == at(2)
    assert live[0].attempt == 5


# -- any interleaving ----------------------------------------------------------------------

messages = st.lists(
    st.one_of(
        st.builds(
            lambda n, o, code: ("attempt", n, o, code),
            st.integers(1, 6),
            st.sampled_from(
                ["succeeded", "failed", "already_handled", "closed", "pending", "errored"]
            ),
            st.sampled_from([None, "insufficient_funds", "stolen_card", "expired_card"]),
        ),
        st.just(("paid", 0, "", None)),
        st.just(("update", 0, "", None)),
        st.just(("deadline", 0, "", None)),
        st.just(("stop", 0, "", None)),
    ),
    max_size=25,
)


@given(
    decline=st.sampled_from(["insufficient_funds", "expired_card", "stolen_card"]), script=messages
)
def test_any_interleaving_ends_consistent_and_never_charges_after_recovery(
    decline: str, script: list[tuple[str, int, str, str | None]]
) -> None:
    run = Run(*opened(decline))
    for i, (kind, n, outcome, code) in enumerate(script):
        when = at(0.5 + i * 0.25)
        message: Message
        if kind == "attempt":
            if run.invoice.attempt(n) is None:
                continue
            message = AttemptReported(
                attempt=n,
                outcome=outcome,  # type: ignore[arg-type]
                decline_code=code,
                at=when,
            )
        elif kind == "paid":
            message = PaidOutOfBand(at=when)
        elif kind == "update":
            message = PaymentMethodUpdated(at=when)
        elif kind == "stop":
            message = DunningStopped(at=when, reason="subscription_deleted")
        else:
            message = DeadlinePassed(at=when)
        was = run.invoice.state
        t = run.send(message)
        if was in (InvoiceState.RECOVERED, InvoiceState.CANCELLED) and t is not None:
            # After recovery or a stop nothing is ever scheduled again; a stopped invoice
            # becomes recovered only by a payment.
            assert not any(isinstance(c, ScheduleAttempt) for c in t.commands)
            assert run.invoice.state in (InvoiceState.RECOVERED, was)
        # The same message again is a no-op (duplicates are recorded once) — except a card
        # update, which is a new request each time it is made.
        if not isinstance(message, PaymentMethodUpdated):
            assert run.send(message) is None
    inv = run.invoice
    open_attempts = [a for a in inv.attempts if a.state.is_open]
    if inv.state.is_final:
        assert not open_attempts
    if inv.state is InvoiceState.RECOVERED:
        assert run.types().count("invoice.recovered") == 1
    assert (
        run.types().count("invoice.exhausted")
        <= run.types().count("note.payment_method_updated") + 1
    )
    assert [e.seq for e in run.events] == list(range(1, len(run.events) + 1))
    assert len({e.id for e in run.events}) == len(run.events)
