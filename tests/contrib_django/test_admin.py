"""The admin pages of the ledger and the idempotency records load for a superuser on both
databases, show what the tables hold, and are read-mostly: nothing is added or edited, the
ledger is never deleted, an idempotency record may be; the reconcile action settles pending
charges."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from recoup.contrib.django.models import ChargeRecord, IdempotencyRecord
from recoup.payments import Fault, FaultKind, SimulatedGateway

from .conftest import NOW, add_invoice, charge_body, deliver


@pytest.fixture
def admin_client(database: str, client: Client) -> Client:
    user = User.objects.db_manager(database).create_superuser("admin", "admin@example.test", "pw")
    client.force_login(user)
    return client


def page(client: Client, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, (url, response.status_code)
    return response.content.decode()


def ledger_row(**changes: Any) -> ChargeRecord:
    fields = {
        "charge_key": "charge:inv_1:2",
        "invoice_id": "inv_1",
        "attempt": 2,
        "state": "succeeded",
        "amount": 1999,
        "currency": "usd",
        "provider_charge_id": "ch_123",
        "created_at": NOW,
        "updated_at": NOW,
    } | changes
    return ChargeRecord.objects.create(**fields)


def test_the_charge_pages_load_and_show_the_ledger(admin_client: Client) -> None:
    ledger_row()
    ledger_row(
        charge_key="charge:inv_2:1",
        invoice_id="inv_2",
        attempt=1,
        state="pending",
        provider_charge_id=None,
    )
    changelist = reverse("admin:recoup_chargerecord_changelist")
    listing = page(admin_client, changelist)
    assert "charge:inv_1:2" in listing and "ch_123" in listing and "charge:inv_2:1" in listing
    assert "?invoice_id=inv_1" in listing  # the invoice links to all its charges
    one_invoice = page(admin_client, changelist + "?invoice_id=inv_2")
    assert "charge:inv_2:1" in one_invoice and "charge:inv_1:2" not in one_invoice
    pending = page(admin_client, changelist + "?state=pending")
    assert "charge:inv_2:1" in pending and "charge:inv_1:2" not in pending
    found = page(admin_client, changelist + "?q=ch_123")
    assert "charge:inv_1:2" in found and "charge:inv_2:1" not in found
    detail = page(
        admin_client, reverse("admin:recoup_chargerecord_change", args=[quote("charge:inv_1:2")])
    )
    assert "ch_123" in detail and 'name="_save"' not in detail  # a view, not a form


def test_the_ledger_can_be_neither_added_to_edited_nor_deleted(admin_client: Client) -> None:
    ledger_row()
    key = quote("charge:inv_1:2")
    page(admin_client, reverse("admin:recoup_chargerecord_add"), status=403)
    page(admin_client, reverse("admin:recoup_chargerecord_delete", args=[key]), status=403)
    posted = admin_client.post(
        reverse("admin:recoup_chargerecord_change", args=[key]), {"state": "failed_terminal"}
    )
    assert posted.status_code == 403
    assert ChargeRecord.objects.get().state == "succeeded"
    listing = page(admin_client, reverse("admin:recoup_chargerecord_changelist"))
    assert "delete_selected" not in listing


def test_the_idempotency_pages_load_show_the_state_and_the_stored_answer(
    admin_client: Client,
) -> None:
    IdempotencyRecord.objects.create(
        key="retry:inv_1:2",
        fingerprint="f",
        created_at=NOW,
        status=200,
        content_type="application/json",
        body=b'{"outcome": "succeeded"}',
    )
    IdempotencyRecord.objects.create(
        key="retry:inv_2:1", fingerprint="f", created_at=NOW, locked_at=NOW
    )
    changelist = reverse("admin:recoup_idempotencyrecord_changelist")
    listing = page(admin_client, changelist)
    assert "completed" in listing and "in flight" in listing
    flying = page(admin_client, changelist + "?state=in_flight")
    assert "retry:inv_2:1" in flying and "retry:inv_1:2" not in flying
    done = page(admin_client, changelist + "?state=completed")
    assert "retry:inv_1:2" in done and "retry:inv_2:1" not in done
    detail = page(
        admin_client,
        reverse("admin:recoup_idempotencyrecord_change", args=[quote("retry:inv_1:2")]),
    )
    assert "&quot;outcome&quot;: &quot;succeeded&quot;" in detail  # escaped, never raw
    page(admin_client, reverse("admin:recoup_idempotencyrecord_add"), status=403)


def test_deleting_an_idempotency_record_lets_the_next_delivery_run(
    admin_client: Client,
) -> None:
    IdempotencyRecord.objects.create(key="stuck", fingerprint="f", created_at=NOW, locked_at=NOW)
    url = reverse("admin:recoup_idempotencyrecord_delete", args=["stuck"])
    assert "Are you sure" in page(admin_client, url)
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert IdempotencyRecord.objects.count() == 0


@pytest.mark.usefixtures("clock")
def test_the_reconcile_action_settles_the_selected_pending_charges(
    admin_client: Client, gateway: SimulatedGateway
) -> None:
    add_invoice()
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    deliver(Client(), "/recoup/charge", charge_body(), message_id="job_1")
    assert ChargeRecord.objects.get().state == "pending"
    response = admin_client.post(
        reverse("admin:recoup_chargerecord_changelist"),
        {"action": "reconcile", "index": "0", "_selected_action": ["charge:inv_1:2"]},
        follow=True,
    )
    assert "Invoice inv_1, attempt 2 (charge:inv_1:2): paid" in response.content.decode()
    assert ChargeRecord.objects.get().state == "succeeded"
    assert gateway.charges_per_key() == {"charge:inv_1:2": 1}


def test_a_staff_user_without_permissions_sees_nothing(database: str, client: Client) -> None:
    user = User.objects.db_manager(database).create_user("staff", password="pw", is_staff=True)
    client.force_login(user)
    page(client, reverse("admin:recoup_chargerecord_changelist"), status=403)
    page(client, reverse("admin:recoup_idempotencyrecord_changelist"), status=403)
