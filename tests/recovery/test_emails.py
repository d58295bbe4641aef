"""Customers' emails end to end, on both backends, through a real SMTP server (aiosmtpd on
127.0.0.1) that keeps every message it accepts: the test-clock proof (a soft decline that
recovers on attempt 3 → exactly the failure email, two retry-failed emails and the recovery
email, each once, each inside the customer's local daytime, each with a link the receiver
verifies, nothing after), once per event (a job fired twice, two runs at once), a crash after
the server accepted a message (the same Message-ID again, never another), bounces and
suppressed addresses, stale emails, and the timeline with the emails' run logs."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from datetime import datetime, time, timedelta
from urllib.parse import parse_qs, urlsplit
from zoneinfo import ZoneInfo

import pytest

from recoup.dunning.invoice import InvoiceState
from recoup.jobs.handlers import HandlerContext, PermanentError
from recoup.jobs.model import JobState
from recoup.messages.channel import Delivery, SendFailed, SmtpChannel, SmtpServer
from recoup.messages.kinds import MessageKind
from recoup.messages.mime import Composed
from recoup.payments import Scenario
from recoup.receiver import verify_update_token
from recoup.recovery.email_jobs import email_job
from recoup.recovery.email_settings import EmailSettings
from recoup.recovery.email_store import EmailState
from recoup.recovery.emails import EmailSender
from recoup.recovery.records import KEEP
from recoup.sealed import SecretBox
from tests.recovery.conftest import Runtime
from tests.support_smtp import Received, SmtpSink, smtp_sink  # noqa: F401  (the fixture)

DAY = timedelta(days=1)
CHICAGO = ZoneInfo("America/Chicago")
LINK = "https://app.example/billing/update?token={token}"
ADA = "ada@example.com"
TOKEN = re.compile(r"https://app\.example/billing/update\?token=[A-Za-z0-9_.%~-]+")


def box() -> SecretBox:
    import os

    return SecretBox([os.environ["RECOUP_SECRET_KEY"]])


def with_emails(runtime: Runtime, sink: SmtpSink, **changes: object) -> EmailSettings:
    settings = EmailSettings(runtime.store.messages, box(), now=runtime.clock.now)
    wanted = settings.settled(
        "default",
        smtp_url=sink.url,
        email_from="Acme Billing <billing@acme.example>",
        reply_to="help@acme.example",
        update_card_url=LINK,
        templates_dir=KEEP,
        allow_unsubscribe=KEEP,
    )
    settings.save(replace(wanted, **changes))  # type: ignore[arg-type]
    return settings


def at_night(runtime: Runtime) -> datetime:
    """Move the test clock to 23:00 in Chicago (the runtime starts at 10:00 there)."""
    runtime.advance(timedelta(hours=13))
    now = runtime.clock.now()
    assert now.astimezone(CHICAGO).time() == time(23, 0)
    return now


def local(instant: datetime) -> time:
    return instant.astimezone(CHICAGO).time()


def link_of(received: Received) -> str:
    text = received.part("plain")
    found = TOKEN.search(text)
    assert found is not None, text
    assert found.group(0).replace("&", "&amp;") in received.part("html")
    return found.group(0)


def token_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["token"][0]


def test_an_invoice_recovered_on_attempt_three_gets_four_emails_each_once_in_daytime(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    with_emails(runtime, smtp_sink)
    gateway = runtime.side.gateway
    gateway.add_card("fp_nsf", Scenario.soft())
    # The card declines attempts 1 and 2 and takes attempt 3 (a card that always succeeds).
    runtime.side.before_charge = lambda data: (
        gateway.add_card("fp_nsf") if data["attempt"] == 3 else None
    )
    failed_at = at_night(runtime)
    runtime.fail("inv_1", "fp_nsf", at=failed_at, customer_email=ADA, customer_name="Ada")

    runtime.advance(30 * DAY)

    invoice = runtime.invoice("inv_1")
    assert invoice.state is InvoiceState.RECOVERED and invoice.recovered_by == "attempt:3"
    kinds = ["payment_failed", "retry_failed", "retry_failed", "recovered"]
    assert smtp_sink.kinds() == kinds
    ledger = runtime.store.messages.invoice_emails("default", "inv_1")
    assert [e.kind for e in ledger] == kinds
    assert all(e.state is EmailState.SENT and e.tries == 1 for e in ledger)
    # Once each: one Message-ID per email, each the ledger's.
    ids = [r.message_id for r in smtp_sink.received]
    assert len(set(ids)) == 4 and ids == [e.message_id for e in ledger]
    # Each inside 08:00–20:00 in Chicago: the failure at 23:00 waited for 08:00.
    for email in ledger:
        assert email.sent_at is not None and email.sent_at == email.send_at
        assert time(8) <= local(email.sent_at) < time(20)
    assert ledger[0].sent_at is not None and local(ledger[0].sent_at) == time(8)
    assert ledger[0].sent_at - failed_at == timedelta(hours=9)
    # Each email has a link the receiver verifies, naming this customer and invoice (the
    # recovery email's is to keep another card on file).
    tenant = runtime.store.get_tenant("default")
    assert tenant is not None
    for received, email in zip(smtp_sink.received, ledger, strict=True):
        assert received.recipients == [ADA]
        assert received.message["From"] == "Acme Billing <billing@acme.example>"
        assert received.message["Reply-To"] == "help@acme.example"
        assert received.message["List-Unsubscribe"] is None  # the tenant does not allow it
        token = verify_update_token(
            token_of(link_of(received)),
            tenant.signing_secret,
            now=email.sent_at,
            customer_id="cus_inv_1",
        )
        assert (token.tenant, token.invoice_id) == ("default", "inv_1")
    # Nothing after the recovery, however long the clock runs.
    runtime.advance(30 * DAY)
    assert len(smtp_sink.received) == 4


def test_the_timeline_shows_each_email_with_its_run_log(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    with_emails(runtime, smtp_sink)
    runtime.side.gateway.add_card("fp_ok")  # attempt 1 succeeds
    runtime.fail("inv_1", "fp_ok", customer_email=ADA)
    runtime.advance(10 * DAY)
    timeline = runtime.dunning.timeline("default", "inv_1")
    assert [e.kind for e in timeline.emails] == ["payment_failed", "recovered"]
    for email in timeline.emails:
        (run,) = timeline.email_runs[email.key]
        assert run.error is None and run.response_excerpt is not None
        assert "sent" in run.response_excerpt and email.message_id in run.response_excerpt


def test_no_smtp_server_no_emails_and_the_invoice_runs_as_before(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    runtime.side.gateway.add_card("fp_ok")
    runtime.fail("inv_1", "fp_ok", customer_email=ADA)
    runtime.advance(10 * DAY)
    assert runtime.invoice("inv_1").state is InvoiceState.RECOVERED
    assert smtp_sink.received == []
    assert runtime.store.messages.invoice_emails("default", "inv_1") == []


# Once per event


def first_email(runtime: Runtime, sink: SmtpSink) -> tuple[EmailSender, HandlerContext]:
    """An invoice whose payment_failed email is planned (not sent), and a context to run it."""
    with_emails(runtime, sink)
    runtime.fail("inv_1", "fp_1", customer_email=ADA)
    (row,) = runtime.store.messages.invoice_emails("default", "inv_1")
    job = runtime.store.get("default", row.job_id)
    assert job is not None and job.state is JobState.SCHEDULED
    sender = EmailSender(runtime.dunning, box())
    ctx = HandlerContext(
        job_id=job.id,
        tenant="default",
        name=job.name,
        attempt=1,
        payload=job.payload,
        idempotency_key=job.idempotency_key,
        run_at=job.run_at,
    )
    return sender, ctx


def test_a_job_fired_twice_sends_one_email(runtime: Runtime, smtp_sink: SmtpSink) -> None:  # noqa: F811
    sender, ctx = first_email(runtime, smtp_sink)
    said = asyncio.run(sender.send(ctx))
    again = asyncio.run(sender.send(replace(ctx, attempt=2)))
    assert said.startswith("sent payment_failed") and again.startswith("not sent")
    assert len(smtp_sink.received) == 1
    # Planned again (a replayed transition, a resync): the same job, no second one.
    (row,) = runtime.store.messages.invoice_emails("default", "inv_1")
    job = runtime.store.get("default", row.job_id)
    assert job is not None
    planned = runtime.store.messages.get_email("default", row.key)
    assert planned is not None and planned.state is EmailState.SENT


def test_two_runs_at_once_send_one_email(runtime: Runtime, smtp_sink: SmtpSink) -> None:  # noqa: F811
    sender, ctx = first_email(runtime, smtp_sink)

    async def both() -> list[object]:  # the same attempt delivered twice, at once
        return await asyncio.gather(sender.send(ctx), sender.send(ctx), return_exceptions=True)

    results = asyncio.run(both())
    # One sent; the other lost the ledger's compare-and-set, or found it sent.
    assert sum(isinstance(r, str) and r.startswith("sent") for r in results) == 1
    assert all(isinstance(r, (str, SendFailed)) for r in results)
    assert asyncio.run(sender.send(replace(ctx, attempt=3))).startswith("not sent")
    assert len(smtp_sink.received) == 1


class AcceptedThenKilled:
    """The real SMTP channel, then a crash before the handler can record the acceptance (what
    a worker killed at that instant leaves): the first `kills` sends die after the server
    accepted the message."""

    def __init__(self, kills: int = 1) -> None:
        self.kills = kills

    def __call__(self, server: SmtpServer) -> AcceptedThenKilled:
        self.server = server
        return self

    async def send(self, message: Composed) -> Delivery:
        delivery = await SmtpChannel(self.server, timeout=5).send(message)
        if self.kills > 0:
            self.kills -= 1
            raise RuntimeError("worker killed after the server's 250, before the ledger")
        return delivery


def test_a_crash_after_the_servers_acceptance_resends_the_same_message_id_only(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    _, ctx = first_email(runtime, smtp_sink)
    sender = EmailSender(runtime.dunning, box(), channel_for=AcceptedThenKilled())
    with pytest.raises(RuntimeError, match="killed"):
        asyncio.run(sender.send(ctx))
    (row,) = runtime.store.messages.invoice_emails("default", "inv_1")
    assert row.state is EmailState.SENDING and row.tries == 1
    # The tenant changes its sender meanwhile: the resend keeps the Message-ID it had.
    with_emails(runtime, smtp_sink, email_from="Billing <billing@other.example>")
    asyncio.run(sender.send(replace(ctx, attempt=2)))
    asyncio.run(sender.send(replace(ctx, attempt=3)))  # and a third run sends nothing
    first, second = smtp_sink.received
    assert first.message_id == second.message_id == row.message_id
    assert first.message_id.endswith("@acme.example>")
    done = runtime.store.messages.get_email("default", row.key)
    assert done is not None and (done.state, done.tries) == (EmailState.SENT, 2)


def test_a_crash_of_the_whole_worker_mid_send_is_retried_by_the_worker_with_one_message_id(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    """The same through the worker on the test clock: the handler dies after the server took
    the message; the job's retry sends it again under the same Message-ID, then it is sent."""
    with_emails(runtime, smtp_sink)
    # The runtime's registry, with the email handler's channel replaced.
    runtime.side.email_channel = AcceptedThenKilled()
    runtime.side.gateway.add_card("fp_1", Scenario.soft())
    runtime.fail("inv_1", "fp_1", customer_email=ADA)
    runtime.advance(2 * DAY)
    payment_failed = [
        r for r in smtp_sink.received if r.message["X-Recoup-Kind"] == "payment_failed"
    ]
    assert len(payment_failed) == 2
    assert payment_failed[0].message_id == payment_failed[1].message_id
    (row, *_) = runtime.store.messages.invoice_emails("default", "inv_1")
    runs = runtime.store.runs("default", row.job_id)
    assert [r.outcome.value for r in runs][-1] == "succeeded" and len(runs) == 2
    assert runs[0].error is not None and "killed" in runs[0].error


# Who is written to, and when not


def test_a_bounce_fails_the_email_and_suppresses_the_address(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    smtp_sink.refuse.add(ADA)
    sender, ctx = first_email(runtime, smtp_sink)
    with pytest.raises(PermanentError, match=r"bounced: .*550"):
        asyncio.run(sender.send(ctx))
    (row,) = runtime.store.messages.invoice_emails("default", "inv_1")
    assert row.state is EmailState.FAILED and row.smtp_reply is not None
    customer = runtime.store.customers.get_customer("default", "cus_inv_1")
    assert customer is not None and customer.is_suppressed
    assert customer.suppressed_reason is not None and "550" in customer.suppressed_reason


def test_a_suppressed_address_is_not_written_to(runtime: Runtime, smtp_sink: SmtpSink) -> None:  # noqa: F811
    sender, ctx = first_email(runtime, smtp_sink)
    runtime.store.customers.suppress(
        "default", "cus_inv_1", email=ADA, reason="complained", at=runtime.clock.now()
    )
    said = asyncio.run(sender.send(ctx))
    assert said.startswith("not sent: address suppressed") and smtp_sink.received == []
    (row,) = runtime.store.messages.invoice_emails("default", "inv_1")
    assert row.state is EmailState.SUPPRESSED


def test_a_dunning_email_for_an_invoice_paid_meanwhile_is_cancelled(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    with_emails(runtime, smtp_sink)
    at_night(runtime)  # the payment_failed email waits for 08:00
    runtime.fail("inv_1", "fp_1", customer_email=ADA)
    runtime.dunning.mark_paid("default", "inv_1")  # paid at 23:30, before the email's time
    runtime.advance(DAY)
    kinds = {e.kind: e.state for e in runtime.store.messages.invoice_emails("default", "inv_1")}
    assert kinds == {"payment_failed": EmailState.CANCELLED, "recovered": EmailState.SENT}
    assert smtp_sink.kinds() == ["recovered"]


def test_a_reminder_of_a_tenant_allowing_it_carries_list_unsubscribe(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    with_emails(runtime, smtp_sink, allow_unsubscribe=True)
    runtime.side.gateway.add_card("fp_nsf", Scenario.soft())
    runtime.fail("inv_1", "fp_nsf", customer_email=ADA)
    runtime.advance(5 * DAY)
    by_kind = {str(r.message["X-Recoup-Kind"]): r.message for r in smtp_sink.received}
    assert by_kind["payment_failed"]["List-Unsubscribe"] is None  # a required notice
    reminder = by_kind[MessageKind.RETRY_FAILED.value]
    assert "unsubscribe=1" in str(reminder["List-Unsubscribe"])
    assert reminder["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


def test_the_providers_payment_page_is_the_link_when_known(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    page = "https://invoice.stripe.com/i/acct_1/inv_1"
    sender, ctx = first_email(runtime, smtp_sink)
    runtime.store.messages.put_payment_page("default", "inv_1", page, at=runtime.clock.now())
    asyncio.run(sender.send(ctx))
    (received,) = smtp_sink.received
    assert page in received.part("plain") and "token=" not in received.part("plain")


def test_the_email_job_is_the_same_however_often_it_is_planned(
    runtime: Runtime,
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    from recoup.recovery.email_jobs import planned_from_payload

    _, ctx = first_email(runtime, smtp_sink)
    planned = planned_from_payload("default", ctx.payload)
    job = email_job(planned)
    assert job.id == ctx.job_id and job.idempotency_key == f"email:{planned.key}"
    assert job.run_at == planned.send_at == ctx.run_at
    assert job.group == "dunning:inv_1"
    assert job.run_at.tzinfo is not None and job.run_at.utcoffset() == timedelta(0)
    assert email_job(planned) == job
    # The job exists already (made with the transition): inserting it again makes none.
    assert runtime.store.insert_many([job, email_job(planned)], now=runtime.clock.now()) == 0
