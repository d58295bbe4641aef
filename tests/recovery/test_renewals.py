"""Renewals and their card_expiring reminders (pre-dunning), on both backends, through a real
SMTP server: a card that runs out before a renewal gets one reminder, in the customer's
daytime, `card_expiry_days_before` days ahead; a card updated first cancels it (reported for
the customer, for one of their invoices, by Stripe, or by the renewal told again); a card
valid then, or a tenant without SMTP, gets none; the same renewal told twice is one."""

from __future__ import annotations

import dataclasses
from datetime import time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from recoup.errors import Conflict, InvalidInput
from recoup.jobs.model import JobState, PythonTarget
from recoup.recovery.customer_store import RenewalState
from recoup.recovery.customers import CustomerBook
from recoup.recovery.email_jobs import email_job
from recoup.recovery.renewals import RenewalReport, renewal_id
from recoup.recovery.stripe_events import event_head
from recoup.recovery.stripe_intake import StripeIntake
from recoup.recovery.stripe_renewals import RenewalUpcoming, read_upcoming
from tests.recovery.conftest import START, Runtime
from tests.recovery.stripe_payloads import CREATED, card_method, event, invoice
from tests.recovery.test_emails import ADA, box, with_emails
from tests.support_smtp import SmtpSink, smtp_sink  # noqa: F401  (the fixture)

DAY = timedelta(days=1)
CHICAGO = ZoneInfo("America/Chicago")
RENEWS_AT = START + 30 * DAY  # 2026-07-23 15:00 UTC, 10:00 in Chicago


def renewal(**changes: Any) -> RenewalReport:
    fields: dict[str, Any] = {
        "customer_id": "cus_1",
        "renews_at": RENEWS_AT,
        "amount": 1999,
        "currency": "USD",
        "timezone": "America/Chicago",
        "exp_month": 6,  # good through June 2026: expired by the renewal in July
        "exp_year": 2026,
        "customer_email": ADA,
        "customer_name": "Ada",
        **changes,
    }
    return RenewalReport(**fields)


def test_a_card_that_runs_out_before_the_renewal_gets_one_reminder_a_week_ahead(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    with_emails(runtime, smtp_sink)
    book = CustomerBook(runtime.dunning)
    stored, created = book.tell_renewal("default", renewal())
    assert created and stored.state is RenewalState.REMINDER_SCHEDULED
    assert stored.renewal_id == renewal_id("default", "cus_1", RENEWS_AT)
    assert stored.currency == "usd"
    job = runtime.store.get("default", stored.reminder_job_id)
    assert job is not None and job.run_at == RENEWS_AT - 7 * DAY  # 10:00 local: in the window
    assert job.group == "customer:cus_1"

    runtime.advance(30 * DAY)
    assert smtp_sink.kinds() == ["card_expiring"]
    (sent,) = smtp_sink.received
    assert sent.recipients == [ADA]
    assert "Ada" in sent.part("plain")
    assert runtime.store.get("default", job.id).state is JobState.SUCCEEDED
    # A card update after the reminder went out changes nothing of it.
    cancelled, _ = book.card_updated("default", "cus_1")
    assert cancelled == []
    after = runtime.store.customers.get_renewal("default", stored.renewal_id)
    assert after is not None and after.state is RenewalState.REMINDER_SCHEDULED


def test_a_reminder_due_at_night_waits_for_the_customers_morning(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    with_emails(runtime, smtp_sink)
    late = RENEWS_AT + timedelta(hours=13)  # 23:00 in Chicago
    stored, _ = CustomerBook(runtime.dunning).tell_renewal("default", renewal(renews_at=late))
    job = runtime.store.get("default", stored.reminder_job_id)
    assert job is not None
    assert job.run_at.astimezone(CHICAGO).time() == time(8, 0)
    assert job.run_at.astimezone(CHICAGO).date() == (late - 6 * DAY).astimezone(CHICAGO).date()


def test_a_renewal_told_late_is_reminded_in_the_next_daytime_before_it(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    with_emails(runtime, smtp_sink)
    runtime.advance(timedelta(hours=13))  # 23:00 in Chicago
    soon = runtime.clock.now() + 3 * DAY  # fewer days ahead than the policy's 7
    # A card good through May: expired by the renewal in June.
    stored, _ = CustomerBook(runtime.dunning).tell_renewal(
        "default", renewal(renews_at=soon, exp_month=5)
    )
    job = runtime.store.get("default", stored.reminder_job_id)
    assert job is not None
    assert job.run_at == runtime.clock.now() + timedelta(hours=9)  # 08:00 the next morning
    # A renewal before the next morning gets none: too late to act on.
    tonight = runtime.clock.now() + timedelta(hours=2)
    late, _ = CustomerBook(runtime.dunning).tell_renewal(
        "default", renewal(customer_id="c2", renews_at=tonight, exp_month=5)
    )
    assert late.state is RenewalState.NO_REMINDER


def test_a_card_updated_before_its_reminder_cancels_the_reminder(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    with_emails(runtime, smtp_sink)
    book = CustomerBook(runtime.dunning)
    stored, _ = book.tell_renewal("default", renewal())
    runtime.advance(10 * DAY)  # before the reminder's day

    cancelled, invoices = book.card_updated("default", "cus_1")
    assert [r.renewal_id for r in cancelled] == [stored.renewal_id] and invoices == []
    assert cancelled[0].state is RenewalState.REMINDER_CANCELLED
    assert runtime.store.get("default", stored.reminder_job_id).state is JobState.CANCELLED
    runtime.advance(30 * DAY)
    assert smtp_sink.received == []
    # Told again (Stripe's next invoice.upcoming) with the old card: still no reminder, the
    # renewal's one was cancelled for good.
    again, created = book.tell_renewal("default", renewal())
    assert not created and again.state is RenewalState.REMINDER_CANCELLED


def test_a_card_update_for_one_of_the_customers_invoices_cancels_the_reminder_too(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    with_emails(runtime, smtp_sink)
    stored, _ = CustomerBook(runtime.dunning).tell_renewal(
        "default", renewal(customer_id="cus_inv_1")
    )
    runtime.fail("inv_1", "fp_exp", decline="expired_card")
    runtime.dunning.payment_method_updated("default", "inv_1")
    found = runtime.store.customers.get_renewal("default", stored.renewal_id)
    assert found is not None and found.state is RenewalState.REMINDER_CANCELLED


def test_a_new_card_that_runs_out_before_the_renewal_too_keeps_the_reminder(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    with_emails(runtime, smtp_sink)
    book = CustomerBook(runtime.dunning)
    stored, _ = book.tell_renewal("default", renewal())
    # Good through June 2026 as well: the renewal on July 23 still needs a new card.
    cancelled, _ = book.card_updated("default", "cus_1", exp_month=6, exp_year=2026)
    assert cancelled == []
    kept = runtime.store.customers.get_renewal("default", stored.renewal_id)
    assert kept is not None and kept.state is RenewalState.REMINDER_SCHEDULED
    # Good through July 2026 (the last day of its month): it covers the renewal.
    cancelled, _ = book.card_updated("default", "cus_1", exp_month=7, exp_year=2026)
    assert [r.renewal_id for r in cancelled] == [stored.renewal_id]
    assert (cancelled[0].exp_month, cancelled[0].exp_year) == (7, 2026)


def test_the_renewal_told_again_with_a_valid_card_cancels_its_reminder(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    with_emails(runtime, smtp_sink)
    book = CustomerBook(runtime.dunning)
    first, created = book.tell_renewal("default", renewal())
    assert created and first.state is RenewalState.REMINDER_SCHEDULED
    second, created = book.tell_renewal("default", renewal(exp_month=12, exp_year=2030))
    assert not created and second.renewal_id == first.renewal_id
    assert second.state is RenewalState.REMINDER_CANCELLED
    assert (second.exp_month, second.exp_year) == (12, 2030)
    runtime.advance(31 * DAY)
    assert smtp_sink.received == []


def test_a_valid_or_unknown_card_or_a_tenant_without_smtp_gets_no_reminder(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    book = CustomerBook(runtime.dunning)
    no_smtp, _ = book.tell_renewal("default", renewal())
    assert no_smtp.state is RenewalState.NO_REMINDER and no_smtp.reminder_job_id is None
    with_emails(runtime, smtp_sink)
    valid, _ = book.tell_renewal("default", renewal(customer_id="c2", exp_year=2030))
    unknown, _ = book.tell_renewal(
        "default", renewal(customer_id="c3", exp_month=None, exp_year=None)
    )
    past, _ = book.tell_renewal("default", renewal(customer_id="c4", renews_at=START - DAY))
    assert {r.state for r in (valid, unknown, past)} == {RenewalState.NO_REMINDER}
    runtime.advance(31 * DAY)
    assert smtp_sink.received == []


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"exp_month": 13}, "card.exp_month"),
        ({"exp_year": 26}, "card.exp_year"),
        ({"exp_year": None}, "card"),
        ({"amount": -1}, "amount"),
        ({"currency": "dollars"}, "currency"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"customer_email": "ada"}, "customer_email"),
        ({"locale": "xx-XX-XX"}, "locale"),
        ({"customer_id": ""}, "customer_id"),
    ],
)
def test_a_bad_renewal_is_refused_naming_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        renewal(**changes)
    assert raised.value.field == field


def test_a_customer_whose_id_holds_an_at_sign_gets_the_reminder_too(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    # Customer ids are the tenant's (any text); the job's name and group are Recoup's and hold
    # no '@' (which names a schedule's occurrences) nor a control character.
    with_emails(runtime, smtp_sink)
    stored, _ = CustomerBook(runtime.dunning).tell_renewal(
        "default", renewal(customer_id="ada@example.com\tlegacy")
    )
    assert stored.state is RenewalState.REMINDER_SCHEDULED
    job = runtime.store.get("default", stored.reminder_job_id)
    assert job is not None and job.name is not None
    assert "@" not in job.name and "\t" not in job.name
    assert job.group == "customer:ada@example.com\\x09legacy"  # the tab written as its escape
    runtime.advance(30 * DAY)
    assert smtp_sink.kinds() == ["card_expiring"]


def test_each_of_a_customers_renewals_gets_its_own_reminder(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    # Two subscriptions renewing a day apart, one card that runs out before both.
    with_emails(runtime, smtp_sink)
    book = CustomerBook(runtime.dunning)
    first, _ = book.tell_renewal("default", renewal())
    second, _ = book.tell_renewal("default", renewal(renews_at=RENEWS_AT + DAY))
    assert first.reminder_job_id != second.reminder_job_id
    for told in (first, second):
        assert told.state is RenewalState.REMINDER_SCHEDULED
        job = runtime.store.get("default", told.reminder_job_id)
        assert job is not None and job.state is JobState.SCHEDULED
    runtime.advance(30 * DAY)
    assert smtp_sink.kinds() == ["card_expiring", "card_expiring"]


def test_a_reminder_named_as_before_its_renaming_is_still_cancelled_by_a_card_update(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Reminders used to be named by their customer (`email-card-expiring-{customer}`); one
    # stored so stays found by its renewal, which holds its job's id.
    with_emails(runtime, smtp_sink)
    book = CustomerBook(runtime.dunning)
    as_before = "email-card-expiring-cus_1"

    def named_as_before(planned: Any) -> Any:
        return dataclasses.replace(email_job(planned), name=as_before)

    monkeypatch.setattr("recoup.recovery.renewals.email_job", named_as_before)
    old, _ = book.tell_renewal("default", renewal())
    monkeypatch.undo()
    job = runtime.store.get("default", old.reminder_job_id)
    assert job is not None and job.name == as_before and job.state is JobState.SCHEDULED
    # A renewal told since is named its new way and lives beside the old one.
    new, _ = book.tell_renewal("default", renewal(renews_at=RENEWS_AT + DAY))
    assert new.state is RenewalState.REMINDER_SCHEDULED

    cancelled, _ = book.card_updated("default", "cus_1")
    assert {r.renewal_id for r in cancelled} == {old.renewal_id, new.renewal_id}
    for told in (old, new):
        assert runtime.store.get("default", told.reminder_job_id).state is JobState.CANCELLED
    runtime.advance(31 * DAY)
    assert smtp_sink.received == []


def test_a_reminder_whose_name_a_live_job_holds_is_refused_and_nothing_is_told(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    # The one creation path skips a job clashing on a live name: the renewal is not stored
    # pointing at a job that does not exist, the whole telling is refused.
    with_emails(runtime, smtp_sink)
    rid = renewal_id("default", "cus_1", RENEWS_AT)
    runtime.dunning.scheduler.enqueue(
        PythonTarget(handler="noop"), name=f"email-card-expiring-{rid}", delay=DAY
    )
    with pytest.raises(Conflict):
        CustomerBook(runtime.dunning).tell_renewal("default", renewal())
    assert runtime.store.customers.get_renewal("default", rid) is None


# Through Stripe's events


def upcoming(*, exp_year: int) -> dict[str, Any]:
    body = invoice(timezone="America/Chicago")
    del body["id"]  # an upcoming invoice has none yet
    body["next_payment_attempt"] = int(RENEWS_AT.timestamp())
    body["customer_name"] = "Jenny Rosen"
    method = card_method()
    method["card"]["exp_month"], method["card"]["exp_year"] = 6, exp_year
    body["default_payment_method"] = method
    return event("invoice.upcoming", body, event_id=f"evt_up_{exp_year}", created=CREATED)


def test_stripes_upcoming_renewal_becomes_one_report_with_its_card_and_contact() -> None:
    found = read_upcoming(event_head(upcoming(exp_year=2026)), default_timezone="UTC")
    assert isinstance(found, RenewalUpcoming), found
    assert found.to_report() == RenewalReport(
        customer_id="cus_QxYz123",
        renews_at=RENEWS_AT,
        amount=1999,
        currency="usd",
        timezone="America/Chicago",
        exp_month=6,
        exp_year=2026,
        customer_email="jenny@example.com",
        customer_name="Jenny Rosen",
    )


def test_stripes_invoice_upcoming_plans_the_reminder_and_a_card_update_cancels_it(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    with_emails(runtime, smtp_sink)
    intake = StripeIntake(runtime.dunning, runtime.store, box=box())
    answer = intake.receive("default", upcoming(exp_year=2026))
    assert answer.outcome == "renewal_recorded", answer.detail
    rid = renewal_id("default", "cus_QxYz123", RENEWS_AT)
    stored = runtime.store.customers.get_renewal("default", rid)
    assert stored is not None and stored.state is RenewalState.REMINDER_SCHEDULED
    customer = runtime.store.customers.get_customer("default", "cus_QxYz123")
    assert customer is not None
    assert (customer.email, customer.name) == ("jenny@example.com", "Jenny Rosen")
    assert intake.receive("default", upcoming(exp_year=2026)).replayed  # once per event

    updated = card_method()
    updated["card"]["exp_month"], updated["card"]["exp_year"] = 9, 2030
    answer = intake.receive(
        "default", event("payment_method.automatically_updated", updated, event_id="evt_pm")
    )
    assert answer.outcome == "reminders_cancelled", answer.detail
    stored = runtime.store.customers.get_renewal("default", rid)
    assert stored is not None and stored.state is RenewalState.REMINDER_CANCELLED
    assert (stored.exp_month, stored.exp_year) == (9, 2030)
    runtime.advance(31 * DAY)
    assert smtp_sink.received == []
