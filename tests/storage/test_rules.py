"""The store rules stated once for every backend (`recoup.storage.rules`, and the completion
rule of `recoup.jobs.store`); their effect on each backend is pinned by the contract suite."""

from __future__ import annotations

import sqlite3

import pytest

from recoup.errors import InvalidInput
from recoup.jobs.store import MAX_PAGE, latest_per_job
from recoup.storage.rules import (
    check_name_prefix,
    check_page_limit,
    lost_error,
    lost_error_sql,
)


@pytest.mark.parametrize(
    ("items", "kept"),
    [
        ([("a", 1), ("b", 1)], [("a", 1), ("b", 1)]),  # no job twice: all, in order
        ([("a", 2), ("a", 1)], [("a", 2)]),  # a stale attempt after the newer one
        ([("a", 1), ("b", 1), ("a", 2)], [("a", 2), ("b", 1)]),  # jobs keep their first place
        ([("a", 1), ("a", 1)], [("a", 1)]),  # one per job even of one attempt
        ([], []),
    ],
)
def test_a_batch_keeps_the_latest_attempt_of_each_job(
    items: list[tuple[str, int]], kept: list[tuple[str, int]]
) -> None:
    assert latest_per_job(items, lambda item: item) == kept


def test_the_lost_lease_error_reads_the_same_from_python_and_from_sql() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        (text,) = conn.execute(
            f"SELECT {lost_error_sql('w')} FROM (SELECT 'it''s me' AS w)"
        ).fetchone()
    finally:
        conn.close()
    assert text == lost_error("it's me") == "lease expired: worker it's me stopped heartbeating"


@pytest.mark.parametrize("limit", [0, -1, MAX_PAGE + 1])
def test_a_page_limit_outside_1_to_max_page_is_refused(limit: int) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_page_limit(limit)
    assert caught.value.field == "limit"


def test_an_empty_prefix_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        check_name_prefix("")
    assert caught.value.field == "prefix"
    check_name_prefix("a")
    check_page_limit(MAX_PAGE)
