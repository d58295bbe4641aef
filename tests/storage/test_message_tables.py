"""Customers' emails' tables (`store.messages`, migration 0011) on every backend: a tenant's
settings (the SMTP URL only sealed), the ledger's plan-once and compare-and-set records, the
payment pages."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from recoup.errors import StorageError
from recoup.recovery.email_store import Email, EmailState, MessageSettings
from recoup.sealed import SecretBox, new_key
from tests.storage.conftest import Store
from tests.storage.test_dunning_store import TENANT

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
BOX = SecretBox([new_key()])


def settings(**changes: object) -> MessageSettings:
    base = MessageSettings(
        tenant=TENANT,
        smtp_url=BOX.seal("smtp://user:pw@127.0.0.1:2525"),
        email_from="Acme Billing <billing@acme.example>",
        reply_to=None,
        update_card_url="https://app.example/billing?token={token}",
        templates_dir=None,
        allow_unsubscribe=True,
        updated_at=T0,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def planned(key: str = "k1", invoice_id: str | None = "in_1", at: datetime = T0) -> Email:
    return Email(
        tenant=TENANT,
        key=key,
        kind="payment_failed",
        customer_id="cus_1",
        invoice_id=invoice_id,
        send_at=at,
        state=EmailState.PLANNED,
        job_id="job-1",
        created_at=T0,
        updated_at=T0,
    )


def test_a_tenants_settings_are_stored_and_replaced(store: Store) -> None:
    messages = store.messages
    assert messages.get_message_settings(TENANT) is None
    first = settings()
    assert messages.put_message_settings(first) == first
    second = settings(smtp_url=None, allow_unsubscribe=False, updated_at=T0 + timedelta(hours=1))
    messages.put_message_settings(second)
    assert messages.get_message_settings(TENANT) == second
    assert messages.list_message_settings() == [second]
    assert second.sends is False and first.sends is True


@pytest.mark.parametrize(
    "bad",
    [
        {"smtp_url": "smtp://user:pw@127.0.0.1:2525"},  # not sealed
        {"update_card_url": "https://app.example/billing"},  # no {token}
    ],
)
def test_the_schema_refuses_an_unsealed_url_and_a_link_without_a_token(
    store: Store, bad: dict[str, str]
) -> None:
    with pytest.raises(StorageError):
        store.messages.put_message_settings(settings(**bad))
    assert store.messages.get_message_settings(TENANT) is None


def test_an_email_is_planned_once_and_recorded_by_compare_and_set(store: Store) -> None:
    messages = store.messages
    first = messages.plan_email(planned())
    again = messages.plan_email(replace(planned(), kind="recovered", send_at=T0 + timedelta(1)))
    assert again == first  # the first plan stays
    sending = replace(
        first,
        state=EmailState.SENDING,
        tries=1,
        message_id="<k1@acme.example>",
        recipient="ada@example.com",
        updated_at=T0 + timedelta(minutes=1),
    )
    assert messages.record_email(sending, was=EmailState.PLANNED, tries=0) == sending
    # A second run that read the row before the first wrote it loses.
    assert messages.record_email(sending, was=EmailState.PLANNED, tries=0) is None
    sent = replace(
        sending,
        state=EmailState.SENT,
        smtp_reply="250 OK",
        sent_at=T0 + timedelta(minutes=1),
    )
    assert messages.record_email(sent, was=EmailState.SENDING, tries=1) == sent
    assert messages.get_email(TENANT, "k1") == sent
    assert messages.email_counts(TENANT) == {("payment_failed", EmailState.SENT): 1}


def test_a_transitions_emails_are_planned_together_each_key_once(store: Store) -> None:
    messages = store.messages
    first = messages.plan_email(planned("k1"))
    messages.plan_emails([])  # nothing to plan: nothing written
    late = replace(planned("k1"), kind="recovered", send_at=T0 + timedelta(days=1))
    messages.plan_emails([late, planned("k2"), replace(planned("k2"), kind="exhausted")])
    assert messages.get_email(TENANT, "k1") == first  # a key planned already keeps its row
    assert messages.get_email(TENANT, "k2") == planned("k2")  # the first plan of a key stays
    assert messages.email_counts(TENANT) == {("payment_failed", EmailState.PLANNED): 2}


def test_the_schema_refuses_a_sent_email_without_its_message_id(store: Store) -> None:
    first = store.messages.plan_email(planned())
    broken = replace(first, state=EmailState.SENT, sent_at=T0)
    with pytest.raises(StorageError):
        store.messages.record_email(broken, was=EmailState.PLANNED, tries=0)


def test_an_invoices_emails_are_listed_by_send_time(store: Store) -> None:
    messages = store.messages
    messages.plan_email(planned("late", at=T0 + timedelta(days=2)))
    messages.plan_email(planned("early", at=T0))
    messages.plan_email(planned("other", invoice_id="in_2"))
    messages.plan_email(planned("reminder", invoice_id=None))
    assert [e.key for e in messages.invoice_emails(TENANT, "in_1")] == ["early", "late"]


def test_a_payment_page_is_kept_per_invoice_and_replaced(store: Store) -> None:
    messages = store.messages
    assert messages.payment_page(TENANT, "in_1") is None
    messages.put_payment_page(TENANT, "in_1", "https://pay.example/1", at=T0)
    messages.put_payment_page(TENANT, "in_1", "https://pay.example/1b", at=T0)
    assert messages.payment_page(TENANT, "in_1") == "https://pay.example/1b"
