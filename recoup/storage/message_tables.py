"""Customers' emails' tables (`recoup.recovery.email_store.MessageStore`) on both backends: a
tenant's message settings, the email ledger and the providers' payment pages (migration
0011_messages.sql; queries in each backend's `message_queries.sql`).

Written once over the backend's dialect; a store exposes it whole as `store.messages` (the
narrower seam: its callers take a `MessageStore`, not the store).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from recoup.recovery.email_store import Email, EmailState, MessageSettings
from recoup.storage.dialect import Dialect


class SqlMessageTables:
    """`MessageStore` over a dialect's connections, codecs and queries."""

    def __init__(self, dialect: Dialect) -> None:
        self._read = dialect.read
        self._write = dialect.write
        self._statement_write = dialect.statement_write
        self._encode = dialect.encode_instant
        self._decode = dialect.decode_instant
        self._bool = dialect.encode_bool
        self._q = dialect.queries

    # Settings

    def _settings(self, row: Sequence[Any]) -> MessageSettings:
        return MessageSettings(
            tenant=row[0],
            smtp_url=row[1],
            email_from=row[2],
            reply_to=row[3],
            update_card_url=row[4],
            templates_dir=row[5],
            allow_unsubscribe=bool(row[6]),
            updated_at=self._decode(row[7]),
        )

    def get_message_settings(self, tenant: str) -> MessageSettings | None:
        with self._read() as conn:
            row = conn.execute(self._q["get_message_settings"], {"tenant": tenant}).fetchone()
        return None if row is None else self._settings(row)

    def put_message_settings(self, settings: MessageSettings) -> MessageSettings:
        params = {
            "tenant": settings.tenant,
            "smtp_url": settings.smtp_url,
            "email_from": settings.email_from,
            "reply_to": settings.reply_to,
            "update_card_url": settings.update_card_url,
            "templates_dir": settings.templates_dir,
            "allow_unsubscribe": self._bool(settings.allow_unsubscribe),
            "updated_at": self._encode(settings.updated_at),
        }
        with self._write() as conn:
            row = conn.execute(self._q["put_message_settings"], params).fetchone()
        assert row is not None  # an upsert … RETURNING returns its row
        return self._settings(row)

    def list_message_settings(self) -> list[MessageSettings]:
        with self._read() as conn:
            rows = conn.execute(self._q["list_message_settings"]).fetchall()
        return [self._settings(row) for row in rows]

    # The ledger

    def _email(self, row: Sequence[Any]) -> Email:
        return Email(
            tenant=row[0],
            key=row[1],
            kind=row[2],
            customer_id=row[3],
            invoice_id=row[4],
            send_at=self._decode(row[5]),
            state=EmailState(row[6]),
            job_id=row[7],
            recipient=row[8],
            message_id=row[9],
            smtp_reply=row[10],
            tries=row[11],
            job_attempt=row[12],
            created_at=self._decode(row[13]),
            updated_at=self._decode(row[14]),
            sent_at=None if row[15] is None else self._decode(row[15]),
        )

    def _params(self, email: Email) -> dict[str, Any]:
        return {
            "tenant": email.tenant,
            "message_key": email.key,
            "kind": email.kind,
            "customer_id": email.customer_id,
            "invoice_id": email.invoice_id,
            "send_at": self._encode(email.send_at),
            "state": email.state.value,
            "job_id": email.job_id,
            "recipient": email.recipient,
            "message_id": email.message_id,
            "smtp_reply": email.smtp_reply,
            "tries": email.tries,
            "job_attempt": email.job_attempt,
            "created_at": self._encode(email.created_at),
            "updated_at": self._encode(email.updated_at),
            "sent_at": None if email.sent_at is None else self._encode(email.sent_at),
        }

    def plan_email(self, email: Email) -> Email:
        key = {"tenant": email.tenant, "message_key": email.key}
        with self._write() as conn:
            conn.execute(self._q["plan_email"], self._params(email))
            row = conn.execute(self._q["get_email"], key).fetchone()
        assert row is not None  # inserted, or there already
        return self._email(row)

    def plan_emails(self, emails: Sequence[Email]) -> None:
        if emails:
            with self._write() as conn:
                conn.cursor().executemany(self._q["plan_email"], [self._params(e) for e in emails])

    def get_email(self, tenant: str, key: str) -> Email | None:
        with self._read() as conn:
            row = conn.execute(
                self._q["get_email"], {"tenant": tenant, "message_key": key}
            ).fetchone()
        return None if row is None else self._email(row)

    def record_email(self, email: Email, *, was: EmailState, tries: int) -> Email | None:
        params = {**self._params(email), "was": was.value, "was_tries": tries}
        with self._statement_write() as conn:
            row = conn.execute(self._q["record_email"], params).fetchone()
        return None if row is None else self._email(row)

    def invoice_emails(self, tenant: str, invoice_id: str) -> list[Email]:
        params = {"tenant": tenant, "invoice_id": invoice_id}
        with self._read() as conn:
            rows = conn.execute(self._q["invoice_emails"], params).fetchall()
        return [self._email(row) for row in rows]

    def email_counts(self, tenant: str) -> dict[tuple[str, EmailState], int]:
        with self._read() as conn:
            rows = conn.execute(self._q["email_counts"], {"tenant": tenant}).fetchall()
        return {(row[0], EmailState(row[1])): int(row[2]) for row in rows}

    # Payment pages

    def put_payment_page(self, tenant: str, invoice_id: str, url: str, *, at: datetime) -> None:
        params = {
            "tenant": tenant,
            "invoice_id": invoice_id,
            "url": url,
            "updated_at": self._encode(at),
        }
        with self._write() as conn:
            conn.execute(self._q["put_payment_page"], params)

    def payment_page(self, tenant: str, invoice_id: str) -> str | None:
        params = {"tenant": tenant, "invoice_id": invoice_id}
        with self._read() as conn:
            row = conn.execute(self._q["payment_page"], params).fetchone()
        return None if row is None else str(row[0])


__all__ = ["SqlMessageTables"]
