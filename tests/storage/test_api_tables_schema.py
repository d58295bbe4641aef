"""Migrations 0002 and 0017 (the API's tables, operators' actions) on both backends: the
declared columns and indexes, and the invariants their CHECK constraints hold."""

from __future__ import annotations

import pytest

from recoup.tenancy import new_tenant
from recoup.timekeeping.clock import SystemClock
from tests.storage.conftest import Backend, Store

DECLARED = {
    "idempotency_keys": {
        "tenant", "key", "fingerprint", "method", "path", "created_at", "locked_at", "status",
        "content_type", "body",
    },
    "api_tokens": {"id", "tenant", "token_hash", "prefix", "label", "created_at", "revoked_at"},
    "operator_actions": {
        "id", "tenant", "subject", "subject_id", "action", "who", "at", "detail",
    },  # 0017
}  # fmt: skip
DECLARED_INDEXES = {
    "idempotency_keys": {"idempotency_keys_created_at"},
    "api_tokens": {"api_tokens_tenant"},
    "operator_actions": {"operator_actions_subject"},
}


@pytest.mark.parametrize("table", sorted(DECLARED))
def test_migrating_gives_the_declared_api_tables(backend: Backend, table: str) -> None:
    backend.open()  # migrated
    columns, indexes = backend.describe()
    assert columns[table] == DECLARED[table]
    assert indexes[table] == DECLARED_INDEXES[table]


@pytest.mark.parametrize(
    "statement",
    [
        # neither in flight nor completed
        "INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, created_at)"
        " VALUES ('t', 'k1', 'f', 'POST', '/', {now})",
        # both in flight and completed
        "INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, created_at,"
        " locked_at, status, content_type, body) VALUES ('t', 'k2', 'f', 'POST', '/', {now},"
        " {now}, 201, 'application/json', {body})",
        # completed without a body
        "INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, created_at,"
        " status) VALUES ('t', 'k3', 'f', 'POST', '/', {now}, 201)",
        # revoked before it was created
        "INSERT INTO api_tokens (id, tenant, token_hash, prefix, created_at, revoked_at)"
        " VALUES ('i', 't', 'h', 'p', {now}, {before})",
        # an action on something that is neither a job nor an invoice
        "INSERT INTO operator_actions (id, tenant, subject, subject_id, action, who, at)"
        " VALUES ('a1', 't', 'schedule', 's', 'cancel', 'ops', {now})",
        # an action by nobody
        "INSERT INTO operator_actions (id, tenant, subject, subject_id, action, who, at)"
        " VALUES ('a2', 't', 'job', 'j', 'cancel', '', {now})",
    ],
)
def test_the_api_tables_refuse_impossible_rows(
    backend: Backend, store: Store, statement: str
) -> None:
    store.ensure_tenant(new_tenant("t", now=SystemClock().now()))
    values = {"now": backend.now_sql, "before": backend.earlier_sql, "body": backend.bytes_sql}
    with pytest.raises(Exception, match=r"(?i)check|constraint"):
        backend.execute(statement.format(**values))
