"""Customers and their renewals (`recoup.recovery.customer_store.CustomerStore`) on both
backends (migration 0012_customers.sql; queries in each backend's `customer_queries.sql`).

Written once over the backend's dialect; a store exposes it whole as `store.customers`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from recoup.dunning.access import Access
from recoup.dunning.invoice import InvoiceState
from recoup.recovery.customer_store import (
    MAX_REASON,
    Customer,
    CustomerInvoice,
    Renewal,
    RenewalState,
)
from recoup.storage.dialect import Dialect


class SqlCustomerTables:
    """`CustomerStore` over a dialect's connections, instant codec and queries."""

    def __init__(self, dialect: Dialect) -> None:
        self._read = dialect.read
        self._write = dialect.write
        self._statement_write = dialect.statement_write
        self._encode = dialect.encode_instant
        self._decode = dialect.decode_instant
        self._q = dialect.queries

    def _maybe(self, value: Any) -> datetime | None:
        return None if value is None else self._decode(value)

    def _customer(self, row: Sequence[Any]) -> Customer:
        return Customer(
            tenant=row[0],
            customer_id=row[1],
            email=row[2],
            name=row[3],
            locale=row[4],
            access=Access(row[5]),
            access_changed_at=self._maybe(row[6]),
            suppressed_at=self._maybe(row[7]),
            suppressed_reason=row[8],
            updated_at=self._decode(row[9]),
        )

    def get_customer(self, tenant: str, customer_id: str) -> Customer | None:
        params = {"tenant": tenant, "customer_id": customer_id}
        with self._read() as conn:
            row = conn.execute(self._q["get_customer"], params).fetchone()
        return None if row is None else self._customer(row)

    def put_customer(
        self,
        tenant: str,
        customer_id: str,
        *,
        email: str | None = None,
        name: str | None = None,
        locale: str | None = None,
        at: datetime,
    ) -> Customer:
        params = {
            "tenant": tenant,
            "customer_id": customer_id,
            "email": email,
            "name": name,
            "locale": locale,
            "at": self._encode(at),
        }
        with self._statement_write() as conn:
            row = conn.execute(self._q["put_customer"], params).fetchone()
        assert row is not None  # an upsert … RETURNING returns its row
        return self._customer(row)

    def suppress(
        self, tenant: str, customer_id: str, *, email: str, reason: str, at: datetime
    ) -> Customer | None:
        params = {
            "tenant": tenant,
            "customer_id": customer_id,
            "email": email,
            "reason": reason[:MAX_REASON] or "suppressed",
            "at": self._encode(at),
        }
        key = {"tenant": tenant, "customer_id": customer_id}
        with self._write() as conn:
            conn.execute(self._q["suppress_customer"], params)
            row = conn.execute(self._q["get_customer"], key).fetchone()
        return None if row is None else self._customer(row)

    def set_access(
        self, tenant: str, customer_id: str, access: Access, *, at: datetime
    ) -> Customer:
        params = {
            "tenant": tenant,
            "customer_id": customer_id,
            "access": access.value,
            "at": self._encode(at),
        }
        with self._statement_write() as conn:
            row = conn.execute(self._q["set_customer_access"], params).fetchone()
        assert row is not None
        return self._customer(row)

    def lock_customer(self, tenant: str, customer_id: str, *, at: datetime) -> Customer:
        params = {"tenant": tenant, "customer_id": customer_id, "at": self._encode(at)}
        with self._write() as conn:
            conn.execute(self._q["ensure_customer"], params)
            row = conn.execute(self._q["lock_customer"], params).fetchone()
        assert row is not None  # ensured just before, in the same transaction
        return self._customer(row)

    def customer_invoices(self, tenant: str, customer_id: str) -> list[CustomerInvoice]:
        params = {"tenant": tenant, "customer_id": customer_id}
        with self._read() as conn:
            rows = conn.execute(self._q["customer_invoices"], params).fetchall()
        return [
            CustomerInvoice(
                invoice_id=row[0],
                state=InvoiceState(row[1]),
                final_action=row[2],
                failed_at=self._decode(row[3]),
                policy=row[4],
            )
            for row in rows
        ]

    # Renewals

    def _renewal(self, row: Sequence[Any]) -> Renewal:
        return Renewal(
            tenant=row[0],
            renewal_id=row[1],
            customer_id=row[2],
            renews_at=self._decode(row[3]),
            amount=row[4],
            currency=row[5],
            timezone=row[6],
            exp_month=row[7],
            exp_year=row[8],
            reminder_job_id=row[9],
            state=RenewalState(row[10]),
            created_at=self._decode(row[11]),
            updated_at=self._decode(row[12]),
        )

    def put_renewal(self, renewal: Renewal) -> tuple[Renewal, bool]:
        params = {
            "tenant": renewal.tenant,
            "renewal_id": renewal.renewal_id,
            "customer_id": renewal.customer_id,
            "renews_at": self._encode(renewal.renews_at),
            "amount": renewal.amount,
            "currency": renewal.currency,
            "timezone": renewal.timezone,
            "exp_month": renewal.exp_month,
            "exp_year": renewal.exp_year,
            "reminder_job_id": renewal.reminder_job_id,
            "state": renewal.state.value,
            "created_at": self._encode(renewal.created_at),
            "updated_at": self._encode(renewal.updated_at),
        }
        key = {"tenant": renewal.tenant, "renewal_id": renewal.renewal_id}
        with self._write() as conn:
            existed = conn.execute(self._q["get_renewal"], key).fetchone() is not None
            row = conn.execute(self._q["put_renewal"], params).fetchone()
        assert row is not None
        return self._renewal(row), not existed

    def get_renewal(self, tenant: str, renewal_id: str) -> Renewal | None:
        params = {"tenant": tenant, "renewal_id": renewal_id}
        with self._read() as conn:
            row = conn.execute(self._q["get_renewal"], params).fetchone()
        return None if row is None else self._renewal(row)

    def customer_renewals(
        self, tenant: str, customer_id: str, *, state: RenewalState | None = None
    ) -> list[Renewal]:
        params = {
            "tenant": tenant,
            "customer_id": customer_id,
            "state": None if state is None else state.value,
        }
        with self._read() as conn:
            rows = conn.execute(self._q["customer_renewals"], params).fetchall()
        return [self._renewal(row) for row in rows]


__all__ = ["Customer", "SqlCustomerTables"]
