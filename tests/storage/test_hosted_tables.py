"""Hosted charging's tables (`store.hosted`, migration 0010) and the invoice state it brings
(`cancelled`), on every backend."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from recoup.dunning.invoice import Invoice, InvoiceState
from recoup.errors import StorageError
from recoup.recovery.hosted_store import HostedCharge, HostedChargeState, HostedCharging
from recoup.recovery.store import InvoiceChange
from recoup.sealed import SecretBox, new_key
from tests.storage.conftest import Backend, Store
from tests.storage.test_dunning_store import TENANT, event, invoice

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
BOX = SecretBox([new_key()])


def pending(n: int = 1, invoice_id: str = "in_1") -> HostedCharge:
    return HostedCharge(
        tenant=TENANT,
        charge_key=f"charge:{invoice_id}:{n}",
        invoice_id=invoice_id,
        attempt=n,
        state=HostedChargeState.PENDING,
        created_at=T0,
        updated_at=T0,
    )


def test_a_tenants_hosted_charging_is_stored_replaced_and_removed(store: Store) -> None:
    hosted = store.hosted
    assert hosted.get_hosted_charging(TENANT) is None
    first = HostedCharging(
        tenant=TENANT, provider="stripe", api_key=BOX.seal("rk_test_1"), updated_at=T0
    )
    assert hosted.put_hosted_charging(first) == first
    second = replace(first, api_key=BOX.seal("rk_test_2"), updated_at=T0 + timedelta(hours=1))
    hosted.put_hosted_charging(second)
    found = hosted.get_hosted_charging(TENANT)
    assert found == second and BOX.open(found.api_key) == "rk_test_2"
    assert hosted.list_hosted_charging() == [second]
    assert hosted.delete_hosted_charging(TENANT) is True
    assert hosted.delete_hosted_charging(TENANT) is False
    assert hosted.get_hosted_charging(TENANT) is None


def test_a_key_stored_unsealed_is_refused_by_the_schema(store: Store) -> None:
    bare = HostedCharging(tenant=TENANT, provider="stripe", api_key="rk_test_1", updated_at=T0)
    with pytest.raises(StorageError):
        store.hosted.put_hosted_charging(bare)
    assert store.hosted.get_hosted_charging(TENANT) is None


def test_a_charge_begins_once_and_is_settled_over_its_row(store: Store) -> None:
    hosted = store.hosted
    begun = hosted.begin_hosted_charge(pending())
    assert begun == pending()
    # A second try of the same attempt finds the first row, whatever it brings.
    again = hosted.begin_hosted_charge(replace(pending(), created_at=T0 + timedelta(minutes=5)))
    assert again == begun
    settled = replace(
        begun,
        state=HostedChargeState.DECLINED,
        decline_code="insufficient_funds",
        advice_code="try_again_later",
        request_id="req_1",
        calls=1,
        updated_at=T0 + timedelta(seconds=2),
    )
    assert hosted.record_hosted_charge(settled) == settled
    assert hosted.get_hosted_charge(TENANT, "charge:in_1:1") == settled
    hosted.begin_hosted_charge(pending(2))
    assert [c.attempt for c in hosted.hosted_charges(TENANT, "in_1")] == [1, 2]
    assert hosted.hosted_charges(TENANT, "in_other") == []


def test_settling_a_charge_never_begun_is_an_error(store: Store) -> None:
    with pytest.raises(LookupError, match="begin it first"):
        store.hosted.record_hosted_charge(pending(3))


def test_an_invoice_can_be_cancelled(store: Store) -> None:
    store.create_invoice(invoice(), [event("inv_1", 1)])

    def cancel(current: Invoice) -> InvoiceChange:
        stopped = replace(current, state=InvoiceState.CANCELLED, version=current.version + 1)
        return InvoiceChange(invoice=stopped, events=())

    store.change_invoice(TENANT, "inv_1", cancel)
    found = store.get_invoice(TENANT, "inv_1")
    assert found is not None and found.state is InvoiceState.CANCELLED


def test_migrating_to_0010_keeps_every_invoice_and_its_references(
    empty_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SQLite migration makes `invoices` again (to change its CHECK): the rows, their
    attempts and events, and the references between them survive it."""
    import importlib

    backend = empty_backend
    module = importlib.import_module(f"recoup.storage.{backend.name}.migrator")
    every = module.load_migrations(f"recoup.storage.{backend.name}.migrations")
    # An older store, with the attempts' timing columns (0016) today's code writes already
    # there (the migrators apply whatever is not yet recorded, in any order).
    older_set = [m for m in every if m.version < 10 or m.version == 16]
    monkeypatch.setattr(module, "load_migrations", lambda _: older_set)
    older = backend.open()
    older.migrate()
    older.create_invoice(invoice(), [event("inv_1", 1)])
    older.create_invoice(invoice("inv_2", state=InvoiceState.EXHAUSTED), [event("inv_2", 1)])
    before = [older.get_invoice(TENANT, i) for i in ("inv_1", "inv_2")]
    newer_set = [*older_set, *(m for m in every if m.version == 10)]
    monkeypatch.setattr(module, "load_migrations", lambda _: newer_set)
    older.migrate()
    assert [older.get_invoice(TENANT, i) for i in ("inv_1", "inv_2")] == before
    assert [e.seq for e in older.invoice_events(TENANT, "inv_1")] == [1]
