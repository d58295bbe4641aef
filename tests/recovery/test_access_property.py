"""A property over the runtime (SQLite in memory, the clock moved by hand): whatever happens to
a customer's invoices (failures of each kind, attempts failing and succeeding, payments,
stops, card updates, days passing with the grace periods' jobs run), the access recorded on
the customer is the pure rule over their invoices as they are, every event carries it, and
each `customer.access_changed` names a real change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.dunning.access import Standing, customer_access
from recoup.dunning.invoice import AttemptState
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.recovery.access_tracking import ACCESS_CHANGED
from recoup.recovery.records import FailureReport
from recoup.recovery.service import Dunning
from recoup.storage import open_store
from recoup.timekeeping.clock import VirtualClock

START = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)
TENANT = "default"
CUSTOMER = "cus_1"
DECLINES = ("insufficient_funds", "stolen_card", "expired_card")  # soft, hard, needs them

steps = st.lists(
    st.one_of(
        st.tuples(st.just("fail"), st.sampled_from(DECLINES)),
        st.tuples(
            st.sampled_from(["attempt_failed", "attempt_succeeded", "paid", "stop", "card"]),
            st.integers(0, 3),
        ),
        st.tuples(st.just("wait"), st.integers(0, 9)),
    ),
    max_size=14,
)


def expected_access(dunning: Dunning) -> str:
    policies = dunning.policies(TENANT)
    standings = [
        Standing(
            invoice_id=c.invoice_id,
            state=c.state,
            final_action=c.final_action,
            failed_at=c.failed_at,
            grace=policies.for_invoice(c.policy).access.grace,
        )
        for c in dunning.store.customers.customer_invoices(TENANT, CUSTOMER)
    ]
    return customer_access(standings, now=dunning.clock.now()).value


def act(dunning: Dunning, clock: VirtualClock, step: tuple[str, Any], ids: list[str]) -> None:
    kind, arg = step
    if kind == "fail":
        invoice_id = f"inv_{len(ids)}"
        ids.append(invoice_id)
        dunning.report_failure(
            TENANT,
            FailureReport(
                invoice_id=invoice_id,
                customer_id=CUSTOMER,
                amount=1999,
                currency="usd",
                failed_at=clock.now(),
                timezone="America/Chicago",
                decline_code=arg,
            ),
        )
        return
    if kind == "wait":
        clock.advance(timedelta(days=arg, hours=arg))
        return
    if not ids:
        return
    invoice_id = ids[arg % len(ids)]
    invoice = dunning.get(TENANT, invoice_id)
    if kind in ("attempt_failed", "attempt_succeeded"):
        scheduled = [a for a in invoice.attempts if a.state is AttemptState.SCHEDULED]
        if scheduled:
            outcome = "failed" if kind == "attempt_failed" else "succeeded"
            dunning.report_outcome(
                TENANT, invoice_id, scheduled[0].attempt, outcome, decline_code="insufficient_funds"
            )
    elif kind == "paid":
        dunning.mark_paid(TENANT, invoice_id)
    elif kind == "stop":
        dunning.stop(TENANT, invoice_id, reason="subscription_cancelled")
    else:
        dunning.payment_method_updated(TENANT, invoice_id)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_the_recorded_access_always_follows_the_invoices(script: list[tuple[str, Any]]) -> None:
    store = open_store("sqlite://:memory:")
    store.migrate()
    try:
        clock = VirtualClock(START)
        dunning = Dunning(Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True)), store)
        dunning.configure(TENANT, charge_url="http://127.0.0.1:9/charge")
        ids: list[str] = []
        for step in script:
            act(dunning, clock, step, ids)
            # The grace periods' jobs, as a worker would have run them by now.
            for invoice_id in ids:
                dunning.recheck_access(TENANT, invoice_id)
            customer = store.customers.get_customer(TENANT, CUSTOMER)
            recorded = customer.access.value if customer is not None else "active"
            assert recorded == expected_access(dunning), (step, ids)
        events = [e for i in ids for e in store.invoice_events(TENANT, i)]
        assert all("access" in e.data for e in events)
        for e in events:
            if e.type == ACCESS_CHANGED:
                assert e.data["access"] != e.data["previous_access"]
    finally:
        store.close()
