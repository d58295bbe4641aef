"""A tenant's life after creation on both backends (migration 0007; queries in each backend's
`tenant_queries.sql`): disabling and enabling it with its jobs held and released, replacing its
signing secret, deleting it with every row of it. The rules are `recoup.tenancy`'s; this
module makes each operation one transaction.

`SqlTenantTables` is written once over `SqlStore`'s hooks (`read()` / `write()`, the instant
codec) and the backend's `TQ` queries; `SqliteStore` and `PostgresStore` inherit it. What
differs by dialect is in the SQL (PostgreSQL locks the tenant's row before deleting) and in
`_wake_workers`, which lets idle workers know that released jobs may be due.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from recoup.errors import Conflict
from recoup.jobs.model import Tenant
from recoup.storage import row_decoding
from recoup.storage.sql_store import SqlStore

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
    "idempotency_keys",
    "api_tokens",
    "runs",
    "jobs",
    "schedules",
    "tenants",
)


class SqlTenantTables(SqlStore):
    """`TenantStore`'s operations past creation, shared by both backends."""

    TQ: ClassVar[Mapping[str, str]]

    def _wake_workers(self, conn: Any) -> None:
        """Inside a transaction that made jobs due: let idle workers of every process know
        once it commits (SQLite bumps its wake-up counter, PostgreSQL notifies)."""
        raise NotImplementedError

    def _tenant(self, conn: Any, tenant_id: str) -> Tenant | None:
        row = conn.execute(self.Q["get_tenant"], {"id": tenant_id}).fetchone()
        return None if row is None else row_decoding.tenant_from_row(row, self._decode_instant)

    def set_tenant_disabled(
        self, tenant_id: str, *, disabled: bool, now: datetime
    ) -> Tenant | None:
        TQ = self.TQ
        params = {"id": tenant_id, "tenant": tenant_id, "now": self._encode_instant(now)}
        with self.write() as conn:
            if disabled:
                changed = conn.execute(TQ["disable_tenant"], params).rowcount
                if changed:
                    conn.execute(TQ["hold_jobs"], params)
            else:
                changed = conn.execute(TQ["enable_tenant"], params).rowcount
                if changed and conn.execute(TQ["release_held_jobs"], params).rowcount:
                    self._wake_workers(conn)
            tenant = self._tenant(conn, tenant_id) if changed else None
        if not disabled and tenant is not None:
            self._jobs_inserted()
        return tenant

    def replace_signing_secret(
        self, tenant_id: str, *, secret: str, previous_until: datetime | None
    ) -> Tenant | None:
        until = None if previous_until is None else self._encode_instant(previous_until)
        params = {"id": tenant_id, "secret": secret, "previous_until": until}
        with self.write() as conn:
            if not conn.execute(self.TQ["replace_signing_secret"], params).rowcount:
                return None
            return self._tenant(conn, tenant_id)

    def delete_tenant(self, tenant_id: str) -> dict[str, int] | None:
        TQ = self.TQ
        with self.write() as conn:
            state = conn.execute(TQ["tenant_state"], {"id": tenant_id}).fetchone()
            if state is None:
                return None
            if state[0] is None:
                raise Conflict(
                    f"tenant {tenant_id!r} is enabled: disable it first "
                    f"(`recoup tenants disable {tenant_id}`), so that nothing of it starts"
                )
            running = conn.execute(TQ["running_jobs_of_tenant"], {"tenant": tenant_id}).fetchone()
            if running[0]:
                raise Conflict(
                    f"tenant {tenant_id!r} has {running[0]} attempt(s) running: delete it once "
                    "they end (a disabled tenant starts no new one)"
                )
            return {
                table: max(0, conn.execute(TQ[f"delete_{table}"], {"tenant": tenant_id}).rowcount)
                for table in TENANT_TABLES
            }


__all__ = ["TENANT_TABLES", "SqlTenantTables"]
