"""Every invoice ends, on both backends: whatever happens to an attempt's job from outside
(cancelled by hand, failed for good once its retries are spent, its tenant disabled and enabled
again), the invoice moves on to its next attempt, or is exhausted with its final action; never
`retrying` with nothing left to run it (issue 24: `recoup jobs cancel --name
dunning-retry-inv_c-4` left the invoice `retrying` for ever)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.dunning.invoice import AttemptState, InvoiceState
from recoup.jobs.model import JobState
from recoup.payments import ChargeRequest, ProviderUnavailable, Scenario
from recoup.recovery.attempt_ends import ENDED_WITHOUT_ANSWER
from recoup.storage.protocol import Store
from tests.recovery.conftest import Runtime

DAY = timedelta(days=1)
DECLINES = Scenario.soft()  # declined at every try: every attempt runs


def unavailable_for(runtime: Runtime, doomed: set[tuple[str, int]]) -> None:
    """The provider behind the charge endpoint is down for these (invoice, attempt) for good:
    the endpoint answers 503, and the attempt's job spends its retries."""
    gateway = runtime.side.gateway
    charge = gateway.charge

    def charging(request: ChargeRequest) -> Any:
        _, invoice, n = request.idempotency_key.split(":")
        if (invoice, int(n)) in doomed:
            raise ProviderUnavailable("down for this test")
        return charge(request)

    gateway.charge = charging  # type: ignore[method-assign]


def nothing_left_retrying(runtime: Runtime, invoice_id: str) -> None:
    invoice = runtime.invoice(invoice_id)
    open_attempts = [a for a in invoice.attempts if a.state.is_open]
    assert invoice.state.is_final, invoice
    assert open_attempts == []


def test_cancelling_the_last_attempt_job_by_hand_exhausts_the_invoice_with_its_final_action(
    runtime: Runtime,
) -> None:
    runtime.side.gateway.add_card("fp_c", DECLINES)
    invoice = runtime.fail("inv_c", "fp_c")
    last = invoice.attempts[-1]
    assert runtime.dunning.scheduler.cancel_by_name(f"dunning-retry-inv_c-{last.attempt}") == 1
    runtime.advance(100 * DAY)
    after = runtime.invoice("inv_c")
    assert after.state is InvoiceState.EXHAUSTED
    assert after.attempt(last.attempt).state is AttemptState.ERRORED  # type: ignore[union-attr]
    assert [a.state for a in after.attempts[:-1]] == [AttemptState.FAILED] * (
        len(after.attempts) - 1
    )
    types = runtime.side.event_types("inv_c")
    assert types.count("invoice.exhausted") == 1
    exhausted = next(e for e in runtime.side.events if e["type"] == "invoice.exhausted")
    assert exhausted["data"]["final_action"] == after.final_action
    events = runtime.store.invoice_events("default", "inv_c")
    notes = [e for e in events if e.type == "note.attempt_errored"]
    assert [n.data.get("detail") for n in notes] == [ENDED_WITHOUT_ANSWER["cancelled"]]


def test_cancelling_a_middle_attempt_job_moves_on_to_the_next_attempt(runtime: Runtime) -> None:
    runtime.side.gateway.add_card("fp_m", DECLINES)
    invoice = runtime.fail("inv_m", "fp_m")
    second = invoice.attempts[1]
    runtime.dunning.scheduler.cancel(second.job_id)
    runtime.advance(100 * DAY)
    after = runtime.invoice("inv_m")
    assert after.state is InvoiceState.EXHAUSTED
    asked = sorted({r["attempt"] for r in runtime.side.requests})
    assert second.attempt not in asked
    assert asked == [a.attempt for a in invoice.attempts if a.attempt != second.attempt]


def test_an_attempt_whose_job_failed_for_good_counts_as_errored(runtime: Runtime) -> None:
    runtime.side.gateway.add_card("fp_f", DECLINES)
    invoice = runtime.fail("inv_f", "fp_f")
    last = invoice.attempts[-1].attempt
    unavailable_for(runtime, {("inv_f", last)})
    runtime.advance(100 * DAY)
    after = runtime.invoice("inv_f")
    job = runtime.store.get("default", after.attempt(last).job_id)  # type: ignore[union-attr]
    assert job is not None and job.state is JobState.FAILED
    assert after.state is InvoiceState.EXHAUSTED
    assert after.attempt(last).state is AttemptState.ERRORED  # type: ignore[union-attr]


INTERVENTIONS = st.sampled_from(["none", "cancel", "fail", "disable"])


@pytest.mark.slow
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=st.lists(INTERVENTIONS, min_size=4, max_size=4))
def test_whatever_happens_to_the_attempts_jobs_every_invoice_ends(
    runtime: Runtime, plan: list[str]
) -> None:
    n = len(runtime.side.requests) + len(runtime.side.events)  # a fresh invoice per example
    invoice_id = f"inv_p{n}_{'_'.join(p[0] for p in plan)}"
    card = f"fp_{invoice_id}"
    runtime.side.gateway.add_card(card, DECLINES)
    invoice = runtime.fail(invoice_id, card, at=runtime.clock.now())
    doomed: set[tuple[str, int]] = set()
    store: Store = runtime.store
    for record, intervention in zip(invoice.attempts, plan, strict=False):
        if intervention == "cancel":
            runtime.dunning.scheduler.cancel(record.job_id)
        elif intervention == "fail":
            doomed.add((invoice_id, record.attempt))
    unavailable_for(runtime, doomed)
    for record, intervention in zip(invoice.attempts, plan, strict=False):
        if intervention == "disable":
            # The tenant disabled across this attempt's instant, enabled a week later.
            runtime.advance(max(record.at - runtime.clock.now(), timedelta(0)))
            store.set_tenant_disabled("default", disabled=True, now=runtime.clock.now())
            runtime.advance(7 * DAY)
            store.set_tenant_disabled("default", disabled=False, now=runtime.clock.now())
    runtime.advance(100 * DAY)
    nothing_left_retrying(runtime, invoice_id)
    after = runtime.invoice(invoice_id)
    if after.state is InvoiceState.EXHAUSTED:
        types = [e.type for e in runtime.store.invoice_events("default", invoice_id)]
        assert types.count("invoice.exhausted") == 1
