"""Customers and their renewals (`store.customers`, migration 0012) on every backend: the
upsert that keeps what is not given, suppression tied to the address, access, renewals."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from recoup.dunning.access import Access
from recoup.errors import StorageError
from recoup.recovery.customer_store import Renewal, RenewalState
from tests.storage.conftest import Store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = T0 + timedelta(hours=1)
TENANT = "acme"


def renewal(renewal_id: str = "ren_1", **changes: object) -> Renewal:
    base = Renewal(
        tenant=TENANT,
        renewal_id=renewal_id,
        customer_id="cus_1",
        renews_at=T0 + timedelta(days=30),
        amount=1200,
        currency="usd",
        timezone="Europe/Berlin",
        exp_month=2,
        exp_year=2026,
        state=RenewalState.NO_REMINDER,
        created_at=T0,
        updated_at=T0,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_customer_is_created_then_changed_only_where_given(store: Store) -> None:
    customers = store.customers
    assert customers.get_customer(TENANT, "cus_1") is None
    first = customers.put_customer(
        TENANT, "cus_1", email="ada@example.com", name="Ada", locale="en_GB", at=T0
    )
    assert (first.email, first.name, first.locale) == ("ada@example.com", "Ada", "en_GB")
    assert first.access is Access.ACTIVE and first.access_changed_at is None
    assert first.updated_at == T0 and not first.is_suppressed and first.writable

    changed = customers.put_customer(TENANT, "cus_1", locale="de_DE", at=LATER)
    assert (changed.email, changed.name, changed.locale) == ("ada@example.com", "Ada", "de_DE")
    assert changed.updated_at == LATER
    assert customers.get_customer(TENANT, "cus_1") == changed
    assert customers.get_customer("other", "cus_1") is None


def test_a_bounce_suppresses_the_address_until_the_customer_has_another(store: Store) -> None:
    customers = store.customers
    customers.put_customer(TENANT, "cus_1", email="ada@example.com", at=T0)
    bounced = customers.suppress(
        TENANT, "cus_1", email="ADA@example.com", reason="550 5.1.1 no such user", at=LATER
    )
    assert bounced is not None and bounced.is_suppressed and not bounced.writable
    assert (bounced.suppressed_at, bounced.suppressed_reason) == (LATER, "550 5.1.1 no such user")

    # A second bounce keeps the first one's instant and reason; the same address again (a
    # replayed failure) keeps the suppression.
    again = customers.suppress(
        TENANT, "cus_1", email="ada@example.com", reason="x", at=LATER + timedelta(minutes=5)
    )
    assert again is not None and again.suppressed_reason == "550 5.1.1 no such user"
    same = customers.put_customer(TENANT, "cus_1", email="Ada@Example.com", at=LATER)
    assert same.is_suppressed

    renewed = customers.put_customer(TENANT, "cus_1", email="ada@new.example", at=LATER)
    assert renewed.email == "ada@new.example" and not renewed.is_suppressed and renewed.writable


def test_a_bounce_of_an_address_since_replaced_changes_nothing(store: Store) -> None:
    customers = store.customers
    customers.put_customer(TENANT, "cus_1", email="new@example.com", at=T0)
    found = customers.suppress(TENANT, "cus_1", email="old@example.com", reason="bounced", at=T0)
    assert found is not None and found.email == "new@example.com" and not found.is_suppressed


def test_a_bounce_for_an_unknown_customer_records_the_address_suppressed(store: Store) -> None:
    found = store.customers.suppress(
        TENANT, "cus_9", email="who@example.com", reason="complaint", at=T0
    )
    assert found is not None and found.email == "who@example.com" and found.is_suppressed


def test_access_is_recorded_with_its_instant(store: Store) -> None:
    customers = store.customers
    customers.put_customer(TENANT, "cus_1", email="ada@example.com", at=T0)
    graced = customers.set_access(TENANT, "cus_1", Access.GRACE, at=LATER)
    assert graced.access is Access.GRACE and graced.access_changed_at == LATER
    assert graced.email == "ada@example.com"
    # A customer Recoup did not know is created with their access.
    other = customers.set_access(TENANT, "cus_2", Access.PAUSED, at=LATER)
    assert other.access is Access.PAUSED and other.email is None


def test_a_renewal_is_stored_then_replaced_by_its_id(store: Store) -> None:
    customers = store.customers
    stored, created = customers.put_renewal(renewal())
    assert created and stored == renewal()
    told_again = renewal(
        exp_month=12,
        exp_year=2030,
        state=RenewalState.REMINDER_CANCELLED,
        reminder_job_id="job_1",
        updated_at=LATER,
    )
    replaced, created = customers.put_renewal(told_again)
    assert not created and replaced == told_again
    assert customers.get_renewal(TENANT, "ren_1") == told_again
    assert customers.get_renewal(TENANT, "ren_2") is None


def test_a_customers_renewals_come_soonest_first_and_by_state(store: Store) -> None:
    customers = store.customers
    late = renewal("ren_late", renews_at=T0 + timedelta(days=60))
    soon = renewal(
        "ren_soon",
        renews_at=T0 + timedelta(days=3),
        state=RenewalState.REMINDER_SCHEDULED,
        reminder_job_id="job_1",
    )
    other = renewal("ren_other", customer_id="cus_2")
    for r in (late, soon, other):
        customers.put_renewal(r)
    assert customers.customer_renewals(TENANT, "cus_1") == [soon, late]
    scheduled = customers.customer_renewals(TENANT, "cus_1", state=RenewalState.REMINDER_SCHEDULED)
    assert scheduled == [soon]


def test_a_reminder_state_without_its_job_is_refused_by_the_schema(store: Store) -> None:
    with pytest.raises(StorageError):
        store.customers.put_renewal(renewal(state=RenewalState.REMINDER_SCHEDULED))
