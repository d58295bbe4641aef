"""A tenant's life after creation on both backends (migration 0007; queries in each backend's
`tenant_queries.sql`): disabling and enabling it with its jobs held and released, replacing its
signing secret, deleting it with every row of it. The rules are `recoup.tenancy`'s; this
module makes each operation one transaction.

`SqlTenantTables` is written once over the dialect (its connections, instant codec and
queries); `SqliteStore` and `PostgresStore` hold one. What differs by dialect is in the SQL
(PostgreSQL locks the tenant's row before deleting) and in the dialect's `wake_workers`, which
lets idle workers know that released jobs may be due.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from recoup.errors import Conflict
from recoup.jobs.model import Tenant
from recoup.storage import row_decoding
from recoup.storage.dialect import Dialect

# Children before the rows they reference (foreign keys hold on both backends), the tenant
# last: the `delete_<table>` blocks of `tenant_queries.sql`.
TENANT_TABLES = (
    "invoice_attempts",
    "invoice_events",
    "invoices",
    "dunning_settings",
    "merchant_tags",
    "intake_events",
    "intake_settings",
    "hosted_charges",
    "hosted_charging",
    "emails",
    "message_settings",
    "payment_pages",
    "customers",
    "renewals",
    "idempotency_keys",
    "operator_actions",  # 0017
    "api_tokens",
    "runs",
    "jobs",
    "schedules",
    "flow_keys",  # 0013
    "tenants",
)


class SqlTenantTables:
    """`TenantStore`'s operations past creation, over a dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._sql = dialect.queries

    def _tenant(self, conn: Any, tenant_id: str) -> Tenant | None:
        row = conn.execute(self._sql["get_tenant"], {"id": tenant_id}).fetchone()
        return (
            None if row is None else row_decoding.tenant_from_row(row, self._dialect.decode_instant)
        )

    def set_tenant_disabled(
        self, tenant_id: str, *, disabled: bool, now: datetime
    ) -> Tenant | None:
        Q = self._sql
        params = {"id": tenant_id, "tenant": tenant_id, "now": self._dialect.encode_instant(now)}
        with self._dialect.write() as conn:
            if disabled:
                changed = conn.execute(Q["disable_tenant"], params).rowcount
                if changed:
                    conn.execute(Q["hold_jobs"], params)
            else:
                changed = conn.execute(Q["enable_tenant"], params).rowcount
                if changed and conn.execute(Q["release_held_jobs"], params).rowcount:
                    self._dialect.wake_workers(conn)
            tenant = self._tenant(conn, tenant_id) if changed else None
        if not disabled and tenant is not None:
            self._dialect.jobs_inserted()
        return tenant

    def replace_signing_secret(
        self, tenant_id: str, *, secret: str, previous_until: datetime | None
    ) -> Tenant | None:
        until = None if previous_until is None else self._dialect.encode_instant(previous_until)
        params = {"id": tenant_id, "secret": secret, "previous_until": until}
        with self._dialect.write() as conn:
            if not conn.execute(self._sql["replace_signing_secret"], params).rowcount:
                return None
            return self._tenant(conn, tenant_id)

    def delete_tenant(self, tenant_id: str) -> dict[str, int] | None:
        Q = self._sql
        with self._dialect.write() as conn:
            state = conn.execute(Q["tenant_state"], {"id": tenant_id}).fetchone()
            if state is None:
                return None
            if state[0] is None:
                raise Conflict(
                    f"tenant {tenant_id!r} is enabled: disable it first "
                    f"(`recoup tenants disable {tenant_id}`), so that nothing of it starts"
                )
            running = conn.execute(Q["running_jobs_of_tenant"], {"tenant": tenant_id}).fetchone()
            if running[0]:
                raise Conflict(
                    f"tenant {tenant_id!r} has {running[0]} attempt(s) running: delete it once "
                    "they end (a disabled tenant starts no new one)"
                )
            return {
                table: max(0, conn.execute(Q[f"delete_{table}"], {"tenant": tenant_id}).rowcount)
                for table in TENANT_TABLES
            }


__all__ = ["TENANT_TABLES", "SqlTenantTables"]
