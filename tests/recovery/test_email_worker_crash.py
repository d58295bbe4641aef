"""`recoup worker` killed with SIGKILL after the SMTP server took an email and before the
worker heard the server's 250 (so before the ledger's `sent`): the restarted worker sends the
email again under the same Message-ID, then records it sent, and never a third time. On both
backends, with real worker processes and a real SMTP server (aiosmtpd) on loopback; every
wait has a deadline."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.recovery.email_settings import EmailSettings
from recoup.recovery.email_store import EmailState
from recoup.recovery.records import KEEP, FailureReport
from recoup.recovery.service import Dunning
from recoup.sealed import SecretBox
from recoup.timekeeping.clock import SystemClock
from tests.jobs.conftest import database  # noqa: F401  (the per-backend fixture)
from tests.jobs.support import Database
from tests.recovery.test_worker_crash import DEADLINE, pytestmark, start_worker  # noqa: F401
from tests.support import wait_until
from tests.support_smtp import Received, SmtpSink, smtp_sink  # noqa: F401


def daytime_zone(now: datetime) -> str:
    """A fixed-offset zone where it is about noon now, so the email is due at once."""
    offset = (12 - now.hour + 12) % 24 - 12  # −12 … +11 hours from UTC
    return "Etc/GMT" if offset == 0 else f"Etc/GMT{-offset:+d}"


def test_kill_9_after_the_servers_acceptance_resends_the_same_message_id_once(
    database: Database,  # noqa: F811
    start_worker: Callable[[], subprocess.Popen[bytes]],  # noqa: F811
    smtp_sink: SmtpSink,  # noqa: F811
) -> None:
    store: Any = database.open()
    clock = SystemClock()
    scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True))
    scheduler.default_tenant()
    dunning = Dunning(scheduler, store)
    dunning.configure("default", policy_toml=None, charge_url="http://127.0.0.1:9/charge")
    settings = EmailSettings(
        store.messages, SecretBox([os.environ["RECOUP_SECRET_KEY"]]), now=clock.now
    )
    settings.save(
        settings.settled(
            "default",
            smtp_url=smtp_sink.url,
            email_from="Acme Billing <billing@acme.example>",
            reply_to=KEEP,
            update_card_url="https://app.example/billing/update?token={token}",
            templates_dir=KEEP,
            allow_unsubscribe=KEEP,
        )
    )
    workers: list[subprocess.Popen[bytes]] = []

    def kill_the_first_sender(received: Received) -> None:
        if len(smtp_sink.received) == 1:  # the server has the message; its 250 never goes
            workers[0].send_signal(signal.SIGKILL)
            workers[0].wait(DEADLINE)

    smtp_sink.on_accept = kill_the_first_sender
    now = datetime.now(UTC)
    dunning.report_failure(
        "default",
        FailureReport(
            invoice_id="inv_1",
            customer_id="cus_1",
            amount=1999,
            currency="usd",
            failed_at=now - timedelta(minutes=5),
            timezone=daytime_zone(now),
            decline_code="insufficient_funds",
            customer_email="ada@example.com",
        ),
    )
    (planned,) = store.messages.invoice_emails("default", "inv_1")
    assert planned.send_at <= datetime.now(UTC) + timedelta(seconds=1)  # due now

    workers.append(start_worker())
    assert wait_until(lambda: workers[0].poll() is not None, DEADLINE), "no email was sent"
    mid = store.messages.get_email("default", planned.key)
    assert mid is not None and (mid.state, mid.tries) == (EmailState.SENDING, 1)

    workers.append(start_worker())

    def sent() -> bool:
        found = store.messages.get_email("default", planned.key)
        return found is not None and found.state is EmailState.SENT

    assert wait_until(sent, DEADLINE), "the restarted worker did not send the email"
    first, second = smtp_sink.received
    assert first.message_id == second.message_id == mid.message_id
    assert first.recipients == second.recipients == ["ada@example.com"]
    done = store.messages.get_email("default", planned.key)
    assert done is not None and done.tries == 2
    # The run is logged when the worker flushes its completions, after the ledger's `sent`.
    job_id = planned.job_id
    assert wait_until(lambda: len(store.runs("default", job_id)) == 2, DEADLINE), "no 2nd run"
    assert [r.outcome.value for r in store.runs("default", job_id)] == ["lost", "succeeded"]
    assert len(smtp_sink.received) == 2
