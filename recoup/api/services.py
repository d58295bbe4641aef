"""What the routes call: the `Scheduler` Python API, the API's own tables (idempotency keys,
tokens) and the clock, behind one small facade so that route handlers only translate HTTP to
operations.

Tenancy is enforced here by construction: every read and write takes the authenticated
tenant, and the stores filter on it, so another tenant's id reads as absent (404).
"""

from __future__ import annotations

from dataclasses import dataclass

from recoup.errors import InvalidInput, NotFound
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.schedules.model import Rule, Schedule
from recoup.jobs.schedules.occurrences import validate_rule
from recoup.jobs.store import MAX_PAGE
from recoup.storage import ApiTables
from recoup.tenancy import TokenOwner, authenticate, identify

__all__ = ["ApiTables", "Services"]


@dataclass(frozen=True)
class Services:
    scheduler: Scheduler
    tables: ApiTables

    def authenticate(self, token: str) -> str | None:
        return authenticate(self.tables, token)

    def identify(self, token: str) -> TokenOwner | None:
        return identify(self.tables, token)

    def ping(self) -> None:
        self.tables.ping()

    def due_backlog(self) -> int:
        return self.scheduler.store.due_backlog(self.scheduler.clock.now())

    def schedule(self, tenant: str, schedule_id: str) -> Schedule:
        """A schedule of the tenant that is not deleted; `NotFound` otherwise (the store keeps
        deleted schedules, which their jobs still name)."""
        found = self.scheduler.get_schedule(schedule_id, tenant=tenant)
        if found.deleted:
            raise NotFound(f"no schedule {schedule_id!r}")
        return found

    def list_schedules(self, tenant: str) -> list[Schedule]:
        """Every live schedule of the tenant, by name, read a page at a time (QStash's list
        and the dashboard show them all; GET /v1/schedules pages)."""
        found: list[Schedule] = []
        cursor: str | None = None
        while True:
            page = self.scheduler.list_schedules(tenant=tenant, limit=MAX_PAGE, cursor=cursor)
            found += page.schedules
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    @staticmethod
    def check_rule(rule: Rule) -> None:
        """`InvalidInput` naming the field as the API spells it (`cron`, `timezone`,
        `anchor.local`), not as the model does (`rule.expression`)."""
        try:
            validate_rule(rule)
        except InvalidInput as exc:
            field = exc.field.removeprefix("rule.")
            if rule.kind == "cron":
                field = "cron" if field == "expression" else field
            else:
                field = f"anchor.{field}"
            raise InvalidInput(field, exc.value, exc.allowed) from None
