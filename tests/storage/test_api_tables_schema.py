"""Migrations 0002 and 0017 (the API's tables, operators' actions) on both backends: the
declared columns and indexes, and the invariants their CHECK constraints hold."""

from __future__ import annotations

import pytest

from recoup.storage import open_api_tables
from recoup.tenancy import issue_token, new_tenant
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


TOKEN_CHANGES = [
    # a token revoked (by the CLI, by another host: the triggers count it all the same)
    "UPDATE api_tokens SET revoked_at = created_at WHERE id = 'k'",
    # a token deleted
    "DELETE FROM api_tokens WHERE id = 'k'",
    # its tenant disabled
    "UPDATE tenants SET disabled_at = created_at WHERE id = 't'",
    # its tenant deleted (`recoup tenants delete`: its tokens with it)
    "delete_tenant",
]


@pytest.mark.parametrize("statement", TOKEN_CHANGES)
def test_every_change_that_may_refuse_a_token_moves_the_epoch(
    backend: Backend, store: Store, statement: str
) -> None:
    tables = open_api_tables(store)
    store.ensure_tenant(new_tenant("t", now=SystemClock().now()))
    issued = issue_token(tables, "t", now=SystemClock().now())
    backend.execute(f"UPDATE api_tokens SET id = 'k' WHERE id = '{issued.info.id}'")
    if statement == "delete_tenant":  # deleted once disabled, as the CLI requires
        store.set_tenant_disabled("t", disabled=True, now=SystemClock().now())
    before = tables.token_epoch()
    if statement == "delete_tenant":
        store.delete_tenant("t")
    else:
        backend.execute(statement)
    assert tables.token_epoch() > before


def test_issuing_a_token_leaves_the_epoch_as_it_was(store: Store) -> None:
    # A new token refuses nothing: the owners cached by every process stay true.
    tables = open_api_tables(store)
    store.ensure_tenant(new_tenant("t", now=SystemClock().now()))
    before = tables.token_epoch()
    issue_token(tables, "t", now=SystemClock().now())
    assert tables.token_epoch() == before
