"""The API's tables on both backends: the idempotency-key store (`IdempotencyStore`) and the
token store (`TokenStore`) that `open_api_tables` opens in a store's database."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.idempotency import DEFAULT_LOCK_TIMEOUT, InProgress, Mismatch, New, Replay
from recoup.storage import ApiTables, Store, open_api_tables
from recoup.tenancy import (
    ActionSubject,
    OperatorAction,
    TokenOwner,
    authenticate,
    hash_token,
    issue_token,
    new_tenant,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def tables(store: Store) -> ApiTables:
    return open_api_tables(store)


# The key store, on both backends


def _tenant(store: Store, tenant_id: str) -> None:
    store.ensure_tenant(new_tenant(tenant_id, now=NOW))


def _begin(tables: ApiTables, *, tenant: str = "a", key: str = "k", fp: str = "f1", **kw: Any):  # type: ignore[no-untyped-def]
    return tables.begin(
        tenant=tenant,
        key=key,
        fingerprint=fp,
        method="POST",
        path="/v1/jobs",
        now=kw.pop("now", NOW),
        **kw,
    )


@pytest.fixture
def keys(store: Store, tables: ApiTables) -> ApiTables:
    _tenant(store, "a")
    _tenant(store, "b")
    return tables


def test_a_key_goes_new_then_in_progress_then_replay(keys: ApiTables) -> None:
    assert _begin(keys) == New(locked_at=NOW)
    assert _begin(keys) == InProgress(retry_after=1)
    keys.complete(
        tenant="a",
        key="k",
        locked_at=NOW,
        status=201,
        body=b'{"id":"x"}',
        content_type="application/json",
    )
    assert _begin(keys) == Replay(status=201, body=b'{"id":"x"}', content_type="application/json")


def test_another_fingerprint_is_a_mismatch_in_flight_and_after(keys: ApiTables) -> None:
    assert _begin(keys) == New(locked_at=NOW)
    assert _begin(keys, fp="f2") == Mismatch()
    keys.complete(
        tenant="a", key="k", locked_at=NOW, status=201, body=b"{}", content_type="application/json"
    )
    assert _begin(keys, fp="f2") == Mismatch()


def test_keys_are_scoped_per_tenant(keys: ApiTables) -> None:
    assert _begin(keys, tenant="a") == New(locked_at=NOW)
    assert _begin(keys, tenant="b", fp="other") == New(locked_at=NOW)


def test_a_released_key_can_be_claimed_again(keys: ApiTables) -> None:
    assert _begin(keys) == New(locked_at=NOW)
    keys.release(tenant="a", key="k", locked_at=NOW)
    assert _begin(keys, fp="f2") == New(locked_at=NOW)


def test_release_leaves_a_completed_key_alone(keys: ApiTables) -> None:
    assert _begin(keys) == New(locked_at=NOW)
    keys.complete(
        tenant="a", key="k", locked_at=NOW, status=200, body=b"{}", content_type="application/json"
    )
    keys.release(tenant="a", key="k", locked_at=NOW)
    assert isinstance(_begin(keys), Replay)


def test_an_abandoned_key_is_taken_over_after_the_lock_timeout(keys: ApiTables) -> None:
    assert _begin(keys) == New(locked_at=NOW)
    just_before = NOW + DEFAULT_LOCK_TIMEOUT - timedelta(seconds=1)
    assert _begin(keys, now=just_before) == InProgress(retry_after=1)
    later = NOW + DEFAULT_LOCK_TIMEOUT + timedelta(seconds=1)
    assert _begin(keys, now=later) == New(locked_at=later)
    assert _begin(keys, now=later) == InProgress(retry_after=1)  # the taker holds it now


def test_a_request_whose_key_was_taken_over_can_neither_complete_nor_release_it(
    keys: ApiTables,
) -> None:
    # The first request stalls past the lock timeout; a retry takes the key over.
    first = _begin(keys)
    assert first == New(locked_at=NOW)
    later = NOW + DEFAULT_LOCK_TIMEOUT + timedelta(seconds=1)
    second = _begin(keys, now=later)
    assert second == New(locked_at=later)
    # The stalled first request finishes: its release and its completion change nothing.
    keys.release(tenant="a", key="k", locked_at=first.locked_at)
    keys.complete(
        tenant="a", key="k", locked_at=first.locked_at, status=500, body=b"x", content_type="t"
    )
    assert _begin(keys, now=later) == InProgress(retry_after=1)  # still the second's
    keys.complete(
        tenant="a", key="k", locked_at=second.locked_at, status=201, body=b"{}", content_type="t"
    )
    assert _begin(keys, now=later) == Replay(status=201, body=b"{}", content_type="t")


def test_prune_deletes_keys_older_than_the_cutoff_only(keys: ApiTables) -> None:
    assert _begin(keys, key="old", now=NOW) == New(locked_at=NOW)
    assert _begin(keys, key="new", now=NOW + timedelta(hours=2)) == New(
        locked_at=NOW + timedelta(hours=2)
    )
    keys.complete(
        tenant="a",
        key="new",
        locked_at=NOW + timedelta(hours=2),
        status=201,
        body=b"{}",
        content_type="application/json",
    )
    assert keys.prune_keys(older_than=NOW + timedelta(hours=1)) == 1
    assert _begin(keys, key="old", fp="another", now=NOW + timedelta(hours=3)) == New(
        locked_at=NOW + timedelta(hours=3)
    )
    assert isinstance(_begin(keys, key="new", now=NOW + timedelta(hours=3)), Replay)


def test_the_unique_key_lets_one_of_many_concurrent_first_requests_through(
    keys: ApiTables,
) -> None:
    outcomes: list[object] = []
    barrier = threading.Barrier(16)

    def first() -> None:
        barrier.wait()
        outcomes.append(_begin(keys, key="race"))

    threads = [threading.Thread(target=first) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count(New(locked_at=NOW)) == 1
    assert outcomes.count(InProgress(retry_after=1)) == 15


# Tokens


def test_tokens_are_stored_hashed_listed_and_revoked(store: Store, tables: ApiTables) -> None:
    _tenant(store, "a")
    issued = issue_token(tables, "a", now=NOW, label="ci")
    assert issued.secret.startswith("rcp_")
    assert authenticate(tables, issued.secret) == "a"
    assert authenticate(tables, issued.secret + "x") is None
    assert authenticate(tables, "not-a-token") is None
    [listed] = tables.list_tokens("a")
    assert listed.id == issued.info.id
    assert listed.label == "ci"
    assert listed.prefix == issued.secret[:12]
    assert issued.secret not in repr(listed)
    assert tables.token_owner(hash_token(issued.secret)) == TokenOwner(tenant="a", disabled=False)

    revoked = tables.revoke_token(issued.info.id, now=NOW + timedelta(minutes=1))
    assert revoked is not None and revoked.revoked_at == NOW + timedelta(minutes=1)
    assert authenticate(tables, issued.secret) is None
    again = tables.revoke_token(issued.info.id, now=NOW + timedelta(minutes=2))
    assert again is not None and again.revoked_at == revoked.revoked_at  # idempotent
    assert tables.revoke_token("no-such-id", now=NOW) is None


def test_tokens_list_by_tenant(store: Store, tables: ApiTables) -> None:
    _tenant(store, "a")
    _tenant(store, "b")
    issue_token(tables, "a", now=NOW)
    issue_token(tables, "b", now=NOW)
    assert {t.tenant for t in tables.list_tokens()} == {"a", "b"}
    assert [t.tenant for t in tables.list_tokens("b")] == ["b"]
    assert [t.id for t in store.list_tenants()] == ["a", "b"]  # the store keeps tenants


# Operators' actions (migration 0017), on both backends


def test_actions_read_back_per_subject_oldest_first_and_per_tenant(
    store: Store, tables: ApiTables
) -> None:
    for tenant in ("acme", "rival"):
        _tenant(store, tenant)

    def act(tenant: str, subject: ActionSubject, subject_id: str, action: str, minute: int) -> None:
        tables.record_action(
            OperatorAction(
                tenant=tenant,
                subject=subject,
                subject_id=subject_id,
                action=action,
                who="ops <alice>",
                at=NOW + timedelta(minutes=minute),
                detail=f"{action} at {minute}",
            )
        )

    act("acme", ActionSubject.JOB, "j1", "cancel", 5)
    act("acme", ActionSubject.JOB, "j1", "retry", 1)
    act("acme", ActionSubject.INVOICE, "j1", "paid", 2)  # same id, another kind of subject
    act("rival", ActionSubject.JOB, "j1", "retry", 3)

    on_job = tables.actions_on("acme", ActionSubject.JOB, "j1")
    assert [(a.action, a.at) for a in on_job] == [
        ("retry", NOW + timedelta(minutes=1)),
        ("cancel", NOW + timedelta(minutes=5)),
    ]
    assert on_job[0].who == "ops <alice>" and on_job[0].detail == "retry at 1"
    assert on_job[0].tenant == "acme" and on_job[0].subject is ActionSubject.JOB
    assert [a.action for a in tables.actions_on("acme", ActionSubject.INVOICE, "j1")] == ["paid"]
    assert [a.action for a in tables.actions_on("rival", ActionSubject.JOB, "j1")] == ["retry"]
    assert tables.actions_on("acme", ActionSubject.JOB, "j2") == []
