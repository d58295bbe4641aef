"""The idempotency store in the handler's database, on SQLite and PostgreSQL: new, replay,
in progress, mismatch; take-over of a crashed handler's lock; compare-and-set completion;
pruning; and the primary key deciding a race of first requests."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from recoup.idempotency.keys import InProgress, Mismatch, New, Outcome, Replay
from recoup.receiver import IdempotencyStore, body_fingerprint

from .conftest import NOW, Db, later

FP = body_fingerprint(b'{"invoice_id": "inv_1", "attempt": 2}')


def test_the_first_request_is_new_and_its_lock_is_now(db: Db) -> None:
    store = IdempotencyStore(db.database)
    assert store.begin("retry:inv_1:2", FP, now=NOW) == New(locked_at=NOW)


def test_a_completed_key_replays_its_status_and_body(db: Db) -> None:
    store = IdempotencyStore(db.database)
    store.begin("k", FP, now=NOW)
    assert store.complete("k", locked_at=NOW, status=200, body=b'{"a":1}', content_type="x/y")
    assert store.begin("k", FP, now=later(1)) == Replay(
        status=200, body=b'{"a":1}', content_type="x/y"
    )


def test_a_key_in_flight_is_in_progress(db: Db) -> None:
    store = IdempotencyStore(db.database)
    store.begin("k", FP, now=NOW)
    outcome = store.begin("k", FP, now=later(1))
    assert isinstance(outcome, InProgress)
    assert outcome.retry_after > 0


def test_another_body_under_the_key_is_a_mismatch_in_flight_or_completed(db: Db) -> None:
    store = IdempotencyStore(db.database)
    other = body_fingerprint(b'{"invoice_id": "inv_1", "attempt": 3}')
    store.begin("k", FP, now=NOW)
    assert store.begin("k", other, now=later(1)) == Mismatch()
    store.complete("k", locked_at=NOW, status=200, body=b"{}", content_type="application/json")
    assert store.begin("k", other, now=later(2)) == Mismatch()


def test_the_fingerprint_ignores_key_order_and_spacing() -> None:
    assert body_fingerprint(b'{"a": 1, "b": [2, 3]}') == body_fingerprint(b'{"b":[2,3],"a":1}')
    assert body_fingerprint(b'{"a": 1}') != body_fingerprint(b'{"a": 2}')
    assert body_fingerprint(b"not json") != body_fingerprint(b"not json!")


def test_a_lock_older_than_the_timeout_is_taken_over(db: Db) -> None:
    store = IdempotencyStore(db.database, lock_timeout=timedelta(seconds=90))
    store.begin("k", FP, now=NOW)  # this handler then crashed
    assert isinstance(store.begin("k", FP, now=later(89)), InProgress)
    assert store.begin("k", FP, now=later(90)) == New(locked_at=later(90))
    # The taker holds the lock now: a third request waits for it.
    assert isinstance(store.begin("k", FP, now=later(91)), InProgress)


def test_a_request_whose_lock_was_taken_over_can_neither_complete_nor_release(db: Db) -> None:
    store = IdempotencyStore(db.database, lock_timeout=timedelta(seconds=90))
    store.begin("k", FP, now=NOW)
    store.begin("k", FP, now=later(100))  # taken over
    assert not store.complete("k", locked_at=NOW, status=500, body=b"x", content_type="t/p")
    assert not store.release("k", locked_at=NOW)
    assert store.complete("k", locked_at=later(100), status=200, body=b"y", content_type="t/p")
    assert store.begin("k", FP, now=later(101)) == Replay(status=200, body=b"y", content_type="t/p")


def test_a_released_key_runs_afresh(db: Db) -> None:
    store = IdempotencyStore(db.database)
    store.begin("k", FP, now=NOW)
    assert store.release("k", locked_at=NOW)
    assert store.begin("k", FP, now=later(1)) == New(locked_at=later(1))


def test_prune_deletes_keys_first_used_before_the_cutoff(db: Db) -> None:
    store = IdempotencyStore(db.database)
    store.begin("old", FP, now=NOW)
    store.complete("old", locked_at=NOW, status=200, body=b"{}", content_type="a/b")
    store.begin("young", FP, now=later(3600))
    assert store.prune(timedelta(hours=24), now=later(24 * 3600 + 1)) == 1
    # A pruned key is a new request again; the young one is still in flight.
    assert store.begin("old", FP, now=later(90_000)) == New(locked_at=later(90_000))
    assert isinstance(store.begin("young", FP, now=later(3601)), InProgress)


def test_of_concurrent_first_requests_exactly_one_is_new(db: Db) -> None:
    store = IdempotencyStore(db.database)
    outcomes: list[Outcome] = []
    start = threading.Barrier(4)

    def first_request() -> None:
        start.wait(timeout=10)
        outcomes.append(store.begin("race", FP, now=NOW))

    threads = [threading.Thread(target=first_request) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(outcomes) == 4
    assert sum(isinstance(o, New) for o in outcomes) == 1
    assert sum(isinstance(o, InProgress) for o in outcomes) == 3


def test_bad_arguments_name_the_field(db: Db) -> None:
    with pytest.raises(ValueError, match="lock_timeout"):
        IdempotencyStore(db.database, lock_timeout=timedelta(0))
    store = IdempotencyStore(db.database)
    with pytest.raises(ValueError, match="key"):
        store.begin("", FP, now=NOW)
    with pytest.raises(ValueError, match="older_than"):
        store.prune(timedelta(seconds=-1), now=NOW)
