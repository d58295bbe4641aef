"""The email handler (`recoup.messages.email`): one planned message sent once, through the
tenant's SMTP server, recorded in the email ledger before and after (`email_store`).

A run, in order:

1. The ledger row of the message key (planned with the job; made now if it was not, as for a
   renewal's reminder). `sent`, `suppressed`, `failed` or `cancelled`: nothing is sent.
2. A message not yet handed to a server whose invoice moved on (a dunning notice for an
   invoice recovered, stopped or exhausted since; a recovery or exhaustion notice for an
   invoice no longer so) is `cancelled`: never a stale email.
3. The recipient (`store.customers`): none, or no address: `failed`; a suppressed address
   (it bounced, or was suppressed): `suppressed`, nothing sent.
4. The message: rendered (`messages.rendering`) in the customer's locale and zone, with the
   link (the provider's payment page when the intake knows it, else the tenant's
   update_card_url with a signed token, `messages.tokens`, under the tenant's current signing
   secret) and, for a reminder of a tenant allowing it, List-Unsubscribe.
5. `sending` (one more try, the job's attempt, and the Message-ID, fixed by the first try:
   `<{key}@{the sender's domain}>`) by compare-and-set; a run that loses it, or finds the
   message `sending` by an attempt not older than its own (another run of the message at the
   same time), retries later and finds the other's record. Only a later attempt of the job
   takes over a message left `sending`: its earlier attempt is over (the job runs one at a
   time; a worker's lost attempt is handed back as a new one).
6. The server's answer: accepted → `sent` with its reply; a refused recipient (5xx to RCPT)
   → `failed`, the address suppressed (`store.customers.suppress`), the job failed; anything
   else → the row stays `sending`, the job retries with its backoff.

Once per event: a message fired twice, or a job run again, finds `sent` and sends nothing. A
crash (a worker killed, a lost connection, a timeout waiting for the server's reply) after the
server accepted the message and before `sent` was written leaves the row `sending`: the next
run sends it again with the Message-ID stored, never a new one, so the receiving side sees one
message delivered twice at most (and mail systems that deduplicate on Message-ID, one). No
design avoids that window: SMTP has no way to ask a server whether it took a message.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from email.utils import parseaddr
from urllib.parse import quote

from recoup.dunning.invoice import Invoice
from recoup.jobs.handlers import HandlerContext, HandlerRegistry, PermanentError
from recoup.jobs.model import Tenant
from recoup.messages.channel import (
    EmailChannel,
    RecipientRefused,
    SendFailed,
    SmtpChannel,
    SmtpServer,
)
from recoup.messages.composing import message_id_for
from recoup.messages.kinds import REMINDER_KINDS
from recoup.messages.mime import Composed
from recoup.messages.planning import PlannedMessage, still_due
from recoup.recovery.customer_store import MAX_REASON
from recoup.recovery.email_jobs import EMAIL_HANDLER, planned_from_payload, planned_row
from recoup.recovery.email_settings import EmailSettings
from recoup.recovery.email_store import Email, EmailState, MessageSettings
from recoup.recovery.service import Dunning
from recoup.sealed import Box

REPLY_LIMIT = 500  # characters of a server's reply kept in the ledger


class EmailSender:
    """The handler, bound to a `Dunning` (its store holds the ledger, the customers and the
    settings). `channel_for` makes the channel of a server (default: `SmtpChannel`)."""

    def __init__(
        self,
        dunning: Dunning,
        box: Box,
        *,
        channel_for: Callable[[SmtpServer], EmailChannel] | None = None,
    ) -> None:
        self.dunning = dunning
        self.settings = EmailSettings(dunning.store.messages, box, now=dunning.clock.now)
        self._channel_for = channel_for or SmtpChannel
        # One channel per server, kept: its connections serve the next emails.
        self._channels: dict[SmtpServer, EmailChannel] = {}

    def register(self, registry: HandlerRegistry) -> HandlerRegistry:
        registry.add(EMAIL_HANDLER, self.send)
        return registry

    async def send(self, ctx: HandlerContext) -> str:
        planned = planned_from_payload(ctx.tenant, ctx.payload)
        prepared = await asyncio.to_thread(self._prepare, planned, ctx.attempt)
        if isinstance(prepared, str):
            return prepared
        row, message, server = prepared
        try:
            delivery = await self._channel(server).send(message)
        except RecipientRefused as exc:
            await asyncio.to_thread(self._bounced, row, exc)
            raise PermanentError(f"bounced: {exc}") from None
        except SendFailed as exc:
            await asyncio.to_thread(self._note, row, str(exc))
            raise
        await asyncio.to_thread(self._sent, row, delivery.reply)
        return f"sent {row.kind} to {row.recipient} as {row.message_id}: {delivery.reply}"

    def _channel(self, server: SmtpServer) -> EmailChannel:
        found = self._channels.get(server)
        if found is None:
            found = self._channels[server] = self._channel_for(server)
        return found

    # Steps 1–5, in a thread (the store is synchronous).

    def _prepare(
        self, planned: PlannedMessage, attempt: int
    ) -> str | tuple[Email, Composed, SmtpServer]:
        store = self.dunning.store
        now = self.dunning.clock.now()
        # Planned with its job, the row is usually there: a read, not a write transaction.
        row = store.messages.get_email(planned.tenant, planned.key) or store.messages.plan_email(
            planned_row(planned, now=now)
        )
        if row.state.is_final:
            return f"not sent: {row.kind} already {row.state}"
        if row.state is EmailState.SENDING and attempt <= (row.job_attempt or 0):
            # Only a later attempt of the job may take over a send: the job runs one attempt
            # at a time, so a later one means the earlier is over (ended, or its worker lost).
            raise SendFailed(
                f"attempt {row.job_attempt} of this email is sending it: asking again later"
            )
        invoice = None
        if planned.invoice_id is not None:
            invoice = store.get_invoice(planned.tenant, planned.invoice_id)
        if row.state is EmailState.PLANNED:
            stale = self._stale(planned, invoice)
            if stale is not None:
                return self._end(row, EmailState.CANCELLED, stale, now=now)
        settings = self.settings.settings(planned.tenant)
        server = self.settings.server(settings)
        if server is None or settings.email_from is None:
            raise SendFailed(
                f"tenant {planned.tenant!r} has no SMTP server and sender (recoup tenants"
                " configure --smtp-url … --email-from …): the email waits"
            )
        customer = store.customers.get_customer(planned.tenant, planned.customer_id)
        if customer is None or customer.email is None:
            self._end(row, EmailState.FAILED, "no address known for the customer", now=now)
            raise PermanentError(
                f"no email address for customer {planned.customer_id!r} (give customer_email"
                " with the failure, or PUT /v1/dunning/customers/{id})"
            )
        if customer.is_suppressed:
            why = f"address suppressed: {customer.suppressed_reason or 'suppressed'}"
            return self._end(
                replace(row, recipient=customer.email), EmailState.SUPPRESSED, why, now=now
            )
        message_id = row.message_id or message_id_for(row.key, settings.email_from)
        message = self._message(
            planned,
            invoice,
            settings,
            store.get_tenant(planned.tenant),  # read once: its name, and its secret signs links
            to=customer.email,
            customer_name=customer.name,
            locale=customer.locale,
            message_id=message_id,
            now=now,
        )
        sending = replace(
            row,
            state=EmailState.SENDING,
            recipient=customer.email,
            message_id=message_id,
            tries=row.tries + 1,
            job_attempt=attempt,
            updated_at=now,
        )
        if self._record(sending, was=row.state, tries=row.tries) is None:
            raise SendFailed(f"another run is sending {row.key}: asking the ledger again later")
        return sending, message, server

    @staticmethod
    def _stale(planned: PlannedMessage, invoice: Invoice | None) -> str | None:
        """Why the message is no longer true to send (`planning.still_due`), if it is not."""
        if still_due(planned, invoice):
            return None
        if invoice is None:
            return f"invoice {planned.invoice_id!r} is gone"
        return f"the invoice is {invoice.state} now"

    def _message(
        self,
        planned: PlannedMessage,
        invoice: Invoice | None,
        settings: MessageSettings,
        tenant: Tenant | None,
        *,
        to: str,
        customer_name: str | None,
        locale: str | None,
        message_id: str,
        now: datetime,
    ) -> Composed:
        from pathlib import Path

        from recoup.messages.composing import compose
        from recoup.messages.rendering import context_for, render

        assert settings.email_from is not None  # checked by the caller
        tenant_name = tenant.name if tenant is not None else planned.tenant
        sender_name = _sender_name(settings.email_from) or tenant_name
        update_url = self.link(planned, invoice, settings, tenant=tenant, now=now)
        unsubscribe = None
        if settings.allow_unsubscribe and planned.kind in REMINDER_KINDS:
            unsubscribe = self.unsubscribe_link(planned, settings, tenant=tenant, now=now)
        context = context_for(
            planned,
            tenant_name=tenant_name,
            customer_name=customer_name,
            locale=locale,
            update_url=update_url,
            unsubscribe_url=unsubscribe,
            sender_name=sender_name,
            support_email=settings.reply_to,
        )
        templates = Path(settings.templates_dir) if settings.templates_dir else None
        rendered = render(context, templates_dir=templates)
        return compose(
            rendered,
            to=to,
            sender=settings.email_from,
            reply_to=settings.reply_to,
            message_id=message_id,
            list_unsubscribe=unsubscribe,
            date=now,
            extra_headers=[("X-Recoup-Kind", planned.kind.value)],  # for the user's mail filters
        )

    def link(
        self,
        planned: PlannedMessage,
        invoice: Invoice | None,
        settings: MessageSettings,
        *,
        tenant: Tenant | None,
        now: datetime,
    ) -> str:
        """The email's one-tap link: the provider's payment page of the invoice when the
        intake knows it, else the tenant's update_card_url with a token signed with `tenant`'s
        secret, else (neither set) a reply to the sender."""
        store = self.dunning.store
        if planned.invoice_id is not None:
            page = store.messages.payment_page(planned.tenant, planned.invoice_id)
            if page is not None:
                return page
        if settings.update_card_url is not None:
            token = self._token(planned, invoice, tenant, now=now)
            if token is not None:
                return settings.update_card_url.replace("{token}", quote(token, safe=""))
        return f"mailto:{parseaddr(settings.reply_to or settings.email_from or '')[1]}"

    def unsubscribe_link(
        self,
        planned: PlannedMessage,
        settings: MessageSettings,
        *,
        tenant: Tenant | None,
        now: datetime,
    ) -> str | None:
        """The one-click opt-out of reminders: the update-card link with `unsubscribe=1`,
        whose token names the customer (the app verifies it as it does the link's)."""
        if settings.update_card_url is None:
            return None
        token = self._token(planned, None, tenant, now=now)
        if token is None:
            return None
        url = settings.update_card_url.replace("{token}", quote(token, safe=""))
        return url + ("&" if "?" in url else "?") + "unsubscribe=1"

    def _token(
        self,
        planned: PlannedMessage,
        invoice: Invoice | None,
        tenant: Tenant | None,
        *,
        now: datetime,
    ) -> str | None:
        from recoup.messages.tokens import issue_update_token

        if tenant is None:
            return None
        policies = self.dunning.policies(planned.tenant)
        policy = policies.for_invoice(invoice.policy) if invoice is not None else policies.a
        expires = max(now, planned.send_at) + timedelta(days=policy.messages.token_days)
        return issue_update_token(
            tenant.signing_secret,
            tenant=planned.tenant,
            customer_id=planned.customer_id,
            invoice_id=planned.invoice_id,
            expires_at=expires,
        )

    # The records after the server answered.

    def _record(self, email: Email, *, was: EmailState, tries: int) -> Email | None:
        """`record_email` as a unit of work: on SQLite it shares the transaction (and the
        commit) of the units that other threads submit at the same time (`group_commit`),
        instead of a write transaction of its own for each of an email's two records."""
        messages = self.dunning.store.messages
        return self.dunning.store.atomically(
            lambda: messages.record_email(email, was=was, tries=tries)
        )

    def _end(self, row: Email, state: EmailState, why: str, *, now: datetime) -> str:
        ended = replace(row, state=state, smtp_reply=why[:REPLY_LIMIT], updated_at=now)
        self._record(ended, was=row.state, tries=row.tries)
        return f"not sent: {why}"

    def _sent(self, row: Email, reply: str) -> None:
        now = self.dunning.clock.now()
        sent = replace(
            row, state=EmailState.SENT, smtp_reply=reply[:REPLY_LIMIT], sent_at=now, updated_at=now
        )
        self._record(sent, was=EmailState.SENDING, tries=row.tries)

    def _note(self, row: Email, error: str) -> None:
        """A try that failed: the row stays `sending` (the next try resends the same
        message), with what the server or the network said."""
        noted = replace(row, smtp_reply=error[:REPLY_LIMIT], updated_at=self.dunning.clock.now())
        self._record(noted, was=EmailState.SENDING, tries=row.tries)

    def _bounced(self, row: Email, refused: RecipientRefused) -> None:
        now = self.dunning.clock.now()
        self._end(row, EmailState.FAILED, f"bounced: {refused.reply}", now=now)
        self.dunning.store.customers.suppress(
            row.tenant,
            row.customer_id,
            email=row.recipient or refused.recipient,
            reason=f"bounced: {refused.reply}"[:MAX_REASON],
            at=now,
        )


@functools.lru_cache(maxsize=256)
def _sender_name(email_from: str) -> str:
    """The display name of a tenant's sender (the same few senders for every email: parsing
    the address each time was a measurable part of composing one)."""
    return parseaddr(email_from)[0]


__all__ = ["EmailSender"]
