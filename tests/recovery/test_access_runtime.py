"""A customer's access through the dunning runtime on a test clock, on both backends: in every
event, on the customer's row, announced by `customer.access_changed` on each change, changed
at the grace period's end by a job of its own, the worst of the customer's invoices."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from recoup.dunning.access import Access
from recoup.dunning.invoice import InvoiceState
from recoup.jobs.model import JobState
from recoup.payments import Scenario
from recoup.recovery.access_tracking import ACCESS_CHANGED, access_job_id
from recoup.recovery.records import FailureReport
from tests.recovery.conftest import START, Runtime

DAY = timedelta(days=1)


def fail(runtime: Runtime, invoice_id: str, card: str, **changes: Any) -> None:
    runtime.side.cards[invoice_id] = card
    fields: dict[str, Any] = {
        "invoice_id": invoice_id,
        "customer_id": "cus_1",
        "amount": 1999,
        "currency": "usd",
        "failed_at": START,
        "timezone": "America/Chicago",
        "decline_code": "insufficient_funds",
        "card_fingerprint": card,
        **changes,
    }
    runtime.dunning.report_failure("default", FailureReport(**fields))


def access(runtime: Runtime) -> Access:
    customer = runtime.store.customers.get_customer("default", "cus_1")
    assert customer is not None
    return customer.access


def announced(runtime: Runtime) -> list[tuple[str, str, str]]:
    """(previous, access, invoice) of each `customer.access_changed` the tenant received."""
    changes = sorted(
        (e for e in runtime.side.events if e["type"] == ACCESS_CHANGED),
        key=lambda e: (e["timestamp"], e["data"]["invoice_id"], e["seq"]),
    )
    return [
        (e["data"]["previous_access"], e["data"]["access"], e["data"]["invoice_id"])
        for e in changes
    ]


def test_access_is_in_every_event_and_each_change_is_announced(runtime: Runtime) -> None:
    runtime.side.gateway.add_card("fp_1", Scenario.soft(clears_after=4 * DAY))
    fail(runtime, "inv_1", "fp_1")
    assert access(runtime) is Access.GRACE
    runtime.advance(14 * DAY)
    assert runtime.invoice("inv_1").state is InvoiceState.RECOVERED
    assert access(runtime) is Access.ACTIVE
    events = runtime.side.events
    assert events and all("access" in e["data"] for e in events)
    # Each event carries the access as its transition left it.
    by_type = {e["type"]: e["data"]["access"] for e in events}
    assert by_type["invoice.retry_scheduled"] == "grace"
    assert by_type["invoice.recovered"] == "active"
    # Recovered within the grace period: never restricted.
    assert announced(runtime) == [("active", "grace", "inv_1"), ("grace", "active", "inv_1")]
    timeline = runtime.dunning.timeline("default", "inv_1")
    assert all("access" in e.data for e in timeline.events)


def test_the_grace_period_ends_at_its_instant_while_retries_still_run(runtime: Runtime) -> None:
    runtime.side.gateway.add_card("fp_never", Scenario.soft(clears_after=60 * DAY))
    fail(runtime, "inv_1", "fp_never")
    grace_ends = START + 7 * DAY  # the default [access] grace_days
    job = runtime.store.get("default", access_job_id("default", "cus_1", grace_ends))
    assert job is not None and job.run_at == grace_ends and job.group == "dunning:inv_1"

    runtime.advance(7 * DAY - timedelta(seconds=1))
    assert access(runtime) is Access.GRACE
    runtime.advance(timedelta(seconds=1))
    assert runtime.invoice("inv_1").state is InvoiceState.RETRYING  # retries still run
    assert access(runtime) is Access.RESTRICTED
    customer = runtime.store.customers.get_customer("default", "cus_1")
    assert customer is not None and customer.access_changed_at == grace_ends
    assert runtime.store.get("default", job.id).state is JobState.SUCCEEDED
    changed = [
        e for e in runtime.dunning.timeline("default", "inv_1").events if e.type == ACCESS_CHANGED
    ]
    assert changed[-1].at == grace_ends and changed[-1].data["access"] == "restricted"

    # The last retry fails: the final action (pause_access, the preset's) pauses access.
    runtime.advance(21 * DAY)
    assert runtime.invoice("inv_1").state is InvoiceState.EXHAUSTED
    assert access(runtime) is Access.PAUSED
    assert [(p, a) for p, a, _ in announced(runtime)] == [
        ("active", "grace"),
        ("grace", "restricted"),
        ("restricted", "paused"),
    ]
    # Paid at last: active again.
    runtime.dunning.mark_paid("default", "inv_1")
    runtime.advance(timedelta(0))
    assert access(runtime) is Access.ACTIVE
    assert announced(runtime)[-1][:2] == ("paused", "active")


def test_with_two_invoices_the_worst_wins(runtime: Runtime) -> None:
    runtime.side.gateway.add_card("fp_stolen", Scenario.hard())
    runtime.side.gateway.add_card("fp_soft", Scenario.soft(clears_after=60 * DAY))
    fail(runtime, "inv_hard", "fp_stolen", decline_code="stolen_card")  # never retried
    assert runtime.invoice("inv_hard").state is InvoiceState.EXHAUSTED
    assert access(runtime) is Access.PAUSED
    fail(runtime, "inv_soft", "fp_soft", failed_at=START + DAY)
    runtime.advance(DAY)
    assert access(runtime) is Access.PAUSED  # the retrying one alone would be in grace

    runtime.dunning.mark_paid("default", "inv_hard")
    assert access(runtime) is Access.GRACE  # what the other invoice gives now
    runtime.dunning.mark_paid("default", "inv_soft")
    assert access(runtime) is Access.ACTIVE
    runtime.advance(timedelta(0))
    assert announced(runtime) == [
        ("active", "paused", "inv_hard"),
        ("paused", "grace", "inv_hard"),
        ("grace", "active", "inv_soft"),
    ]


def test_a_policy_without_grace_restricts_from_the_failure(runtime: Runtime) -> None:
    runtime.dunning.configure(
        "default", policy_toml='name = "strict"\ngaps = [{ days = 1 }]\n[access]\ngrace_days = 0\n'
    )
    runtime.side.gateway.add_card("fp_1", Scenario.soft(clears_after=60 * DAY))
    fail(runtime, "inv_1", "fp_1")
    assert access(runtime) is Access.RESTRICTED
    # No timed change to wait for: no access job.
    assert runtime.store.get("default", access_job_id("default", "cus_1", START)) is None
