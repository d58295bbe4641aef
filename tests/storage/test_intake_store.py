"""The intake store (migration 0008), run unchanged on every backend: intake settings, and the
claim → finish | release life of a provider event that makes a redelivery change nothing."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.errors import InvalidInput
from recoup.recovery.intake_store import (
    Answered,
    Busy,
    Claimed,
    IntakeEvent,
    IntakeSettings,
)
from tests.storage.conftest import Backend, Store

T0 = datetime(2026, 6, 23, 15, 0, 0, 123456, tzinfo=UTC)
LOCK = timedelta(seconds=60)
SECRET = "whsec_" + "a1B2" * 8
PAID = ("invoice.paid", "invoice.payment_succeeded")


def event(event_id: str = "evt_1", **overrides: Any) -> IntakeEvent:
    fields: dict[str, Any] = {
        "tenant": "t1",
        "provider": "stripe",
        "event_id": event_id,
        "type": "invoice.payment_failed",
        "invoice_id": "in_1",
        "occurred_at": T0,
    }
    fields.update(overrides)
    return IntakeEvent(**fields)


def finish(store: Store, e: IntakeEvent, claimed_at: datetime, outcome: str = "done") -> None:
    store.finish_event(
        e,
        claimed_at=claimed_at,
        outcome=outcome,
        answer={"outcome": outcome, "detail": "ünïcode ✓"},
        now=claimed_at + timedelta(seconds=1),
    )


# Settings


def test_settings_are_absent_then_put_replaced_and_read_back(store: Store) -> None:
    assert store.get_intake_settings("t1") is None
    first = IntakeSettings(
        tenant="t1", stripe_webhook_secret=SECRET, default_timezone="Europe/Paris", updated_at=T0
    )
    assert store.put_intake_settings(first) == first
    cleared = IntakeSettings(
        tenant="t1", stripe_webhook_secret=None, default_timezone="UTC", updated_at=T0
    )
    assert store.put_intake_settings(cleared) == cleared
    assert store.get_intake_settings("t1") == cleared
    assert store.get_intake_settings("t2") is None


@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("stripe_webhook_secret", {"stripe_webhook_secret": "sk_live_" + "x" * 20}),
        ("stripe_webhook_secret", {"stripe_webhook_secret": "whsec_ has spaces"}),
        ("stripe_webhook_secret", {"stripe_webhook_secret": "whsec_short"}),
        ("default_timezone", {"default_timezone": "Mars/Olympus"}),
    ],
)
def test_settings_refuse_a_bad_secret_or_zone_without_quoting_the_secret(
    field: str, values: dict[str, Any]
) -> None:
    fields: dict[str, Any] = {
        "tenant": "t1",
        "stripe_webhook_secret": None,
        "default_timezone": "UTC",
        "updated_at": T0,
    }
    with pytest.raises(InvalidInput) as caught:
        IntakeSettings(**{**fields, **values})
    assert caught.value.field == field
    secret = values.get("stripe_webhook_secret")
    if secret is not None:
        assert secret not in str(caught.value)


def test_the_secret_is_never_in_the_settings_repr() -> None:
    settings = IntakeSettings(
        tenant="t1", stripe_webhook_secret=SECRET, default_timezone="UTC", updated_at=T0
    )
    assert SECRET not in repr(settings) and "set" in repr(settings)


def test_the_table_refuses_a_secret_that_is_no_endpoint_secret(
    backend: Backend, store: Store
) -> None:
    with pytest.raises(Exception) as caught:
        backend.execute(
            "INSERT INTO intake_settings (tenant, stripe_webhook_secret, default_timezone, "
            f"updated_at) VALUES ('t1', 'sk_live_x', 'UTC', {backend.now_sql})"
        )
    assert "check" in str(caught.value).lower()
    assert store.get_intake_settings("t1") is None


# Events


def test_the_first_delivery_claims_and_a_later_one_replays_the_answer(store: Store) -> None:
    claim = store.claim_event(event(), now=T0, lock_timeout=LOCK)
    assert claim == Claimed(claimed_at=T0)
    finish(store, event(), T0, "dunning_opened")
    again = store.claim_event(event(), now=T0 + timedelta(days=2), lock_timeout=LOCK)
    assert again == Answered(
        outcome="dunning_opened", answer={"outcome": "dunning_opened", "detail": "ünïcode ✓"}
    )


def test_a_claim_in_flight_is_busy_until_it_goes_stale_then_taken_over(store: Store) -> None:
    store.claim_event(event(), now=T0, lock_timeout=LOCK)
    busy = store.claim_event(event(), now=T0 + timedelta(seconds=20), lock_timeout=LOCK)
    assert busy == Busy(retry_after=40)
    later = T0 + LOCK + timedelta(seconds=1)
    assert store.claim_event(event(), now=later, lock_timeout=LOCK) == Claimed(claimed_at=later)
    # The first delivery wakes up: its answer and its release touch nothing of the taker's.
    finish(store, event(), T0, "stale")
    store.release_event(event(), claimed_at=T0)
    assert isinstance(store.claim_event(event(), now=later, lock_timeout=LOCK), Busy)
    finish(store, event(), later, "taker")
    found = store.claim_event(event(), now=later, lock_timeout=LOCK)
    assert isinstance(found, Answered) and found.outcome == "taker"


def test_a_released_claim_lets_the_next_delivery_act_afresh(store: Store) -> None:
    store.claim_event(event(), now=T0, lock_timeout=LOCK)
    store.release_event(event(), claimed_at=T0)
    retry = T0 + timedelta(seconds=5)
    assert store.claim_event(event(), now=retry, lock_timeout=LOCK) == Claimed(claimed_at=retry)


def test_events_are_apart_by_tenant_and_id(store: Store) -> None:
    store.claim_event(event(), now=T0, lock_timeout=LOCK)
    finish(store, event(), T0)
    other_tenant = event(tenant="t2")
    assert isinstance(store.claim_event(other_tenant, now=T0, lock_timeout=LOCK), Claimed)
    assert isinstance(store.claim_event(event("evt_2"), now=T0, lock_timeout=LOCK), Claimed)


def test_concurrent_first_deliveries_make_one_claim(backend: Backend, store: Store) -> None:
    stores = [backend.open() for _ in range(6)]
    claims: list[object] = []
    start = threading.Barrier(len(stores))

    def deliver(s: Store) -> None:
        start.wait()
        claims.append(s.claim_event(event(), now=T0, lock_timeout=LOCK))

    threads = [threading.Thread(target=deliver, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(isinstance(c, Claimed) for c in claims) == 1
    assert sum(isinstance(c, Busy) for c in claims) == len(stores) - 1


def test_a_payment_since_a_failure_is_found_only_once_processed(store: Store) -> None:
    paid = event("evt_paid", type="invoice.paid", occurred_at=T0 + timedelta(hours=1))
    store.claim_event(paid, now=T0, lock_timeout=LOCK)

    def seen(since: datetime, invoice: str = "in_1", tenant: str = "t1") -> bool:
        return store.invoice_event_since(tenant, "stripe", invoice, types=PAID, since=since)

    assert not seen(T0)  # claimed, not processed
    finish(store, paid, T0)
    assert seen(T0) and seen(T0 + timedelta(hours=1))
    assert not seen(T0 + timedelta(hours=1, microseconds=1))
    assert not seen(T0, invoice="in_2") and not seen(T0, tenant="t2")
    # A failure of the invoice is not a payment.
    assert not store.invoice_event_since(
        "t1", "stripe", "in_1", types=("invoice.payment_failed",), since=T0
    )


def test_pruning_forgets_processed_events_before_the_cutoff_in_batches(store: Store) -> None:
    for n in range(5):
        e = event(f"evt_{n}")
        store.claim_event(e, now=T0 + timedelta(days=n), lock_timeout=LOCK)
        finish(store, e, T0 + timedelta(days=n))
    in_flight = event("evt_open")
    store.claim_event(in_flight, now=T0, lock_timeout=LOCK)
    cutoff = T0 + timedelta(days=3)
    assert store.prune_events(older_than=cutoff, limit=2) == 2
    assert store.prune_events(older_than=cutoff, limit=2) == 1
    assert store.prune_events(older_than=cutoff, limit=2) == 0
    # The forgotten ones can be claimed again; the others, and the claim in flight, stay.
    assert isinstance(store.claim_event(event("evt_0"), now=cutoff, lock_timeout=LOCK), Claimed)
    assert isinstance(store.claim_event(event("evt_4"), now=cutoff, lock_timeout=LOCK), Answered)
    assert isinstance(store.claim_event(in_flight, now=T0, lock_timeout=LOCK), Busy)


def test_an_event_id_the_table_would_refuse_is_invalid_input() -> None:
    with pytest.raises(InvalidInput) as caught:
        event("e" * 256)
    assert caught.value.field == "id"
    with pytest.raises(InvalidInput):
        event(occurred_at=datetime(2026, 6, 23))


def test_the_answer_must_be_json_on_both_backends(backend: Backend, store: Store) -> None:
    store.claim_event(event(), now=T0, lock_timeout=LOCK)
    with pytest.raises(Exception) as caught:
        backend.execute(
            "UPDATE intake_events SET outcome = 'x', answer = 'not json', finished_at = "
            f"{backend.now_sql}"
        )
    assert "json" in str(caught.value).lower() or "check" in str(caught.value).lower()
    assert isinstance(store.claim_event(event(), now=T0, lock_timeout=LOCK), Busy)
