"""Backoff: exponential, jittered, capped; Retry-After as a lower bound."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.jobs.backoff import (
    RETRY_AFTER_LIMIT,
    backoff_ceiling,
    backoff_delay,
    parse_retry_after,
)
from recoup.jobs.model import BackoffPolicy

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

policies = st.builds(
    lambda lo, extra, jitter: BackoffPolicy(
        max_attempts=100,
        min_backoff=timedelta(seconds=lo),
        max_backoff=timedelta(seconds=lo + extra),
        jitter=jitter,
    ),
    st.floats(min_value=0, max_value=3600),
    st.floats(min_value=0, max_value=86_400),
    st.booleans(),
)


@given(policies, st.integers(min_value=1, max_value=200), st.integers())
def test_every_delay_lies_between_min_and_max_backoff(
    policy: BackoffPolicy, attempt: int, seed: int
) -> None:
    delay = backoff_delay(policy, attempt, rng=random.Random(seed))
    assert policy.min_backoff <= delay <= policy.max_backoff
    assert delay <= backoff_ceiling(policy, attempt)


@given(policies, st.integers(min_value=1, max_value=199))
def test_the_ceiling_never_shrinks_from_one_attempt_to_the_next(
    policy: BackoffPolicy, attempt: int
) -> None:
    assert backoff_ceiling(policy, attempt) <= backoff_ceiling(policy, attempt + 1)


@given(policies, st.integers(min_value=1, max_value=60), st.integers())
def test_the_same_seed_gives_the_same_delay(policy: BackoffPolicy, attempt: int, seed: int) -> None:
    first = backoff_delay(policy, attempt, rng=random.Random(seed))
    assert first == backoff_delay(policy, attempt, rng=random.Random(seed))


@given(
    policies,
    st.integers(min_value=1, max_value=60),
    st.floats(min_value=0, max_value=10**7),
    st.integers(),
)
def test_retry_after_is_a_lower_bound_up_to_its_limit(
    policy: BackoffPolicy, attempt: int, retry_after_s: float, seed: int
) -> None:
    retry_after = timedelta(seconds=retry_after_s)
    delay = backoff_delay(policy, attempt, rng=random.Random(seed), retry_after=retry_after)
    limit = max(policy.max_backoff, RETRY_AFTER_LIMIT)
    assert delay >= min(retry_after, limit)
    assert delay <= max(limit, policy.max_backoff)
    assert delay >= policy.min_backoff


def test_without_jitter_the_delay_doubles_from_min_backoff_up_to_the_cap() -> None:
    policy = BackoffPolicy(
        min_backoff=timedelta(seconds=2), max_backoff=timedelta(seconds=20), jitter=False
    )
    delays = [backoff_delay(policy, n).total_seconds() for n in range(1, 7)]
    assert delays == [2, 4, 8, 16, 20, 20]


def test_with_jitter_the_first_retry_is_spread_over_min_backoff_to_twice_it() -> None:
    # A thousand jobs that failed together (one target's outage) must not retry in lockstep.
    policy = BackoffPolicy(min_backoff=timedelta(seconds=3), max_backoff=timedelta(minutes=5))
    rng = random.Random(7)
    delays = [backoff_delay(policy, 1, rng=rng).total_seconds() for _ in range(1000)]
    assert all(3 <= d <= 6 for d in delays)
    assert len(set(delays)) > 990
    assert min(delays) < 3.1 and max(delays) > 5.9


@given(policies, st.integers(min_value=1, max_value=12), st.integers())
def test_a_jittered_delay_lies_between_min_backoff_and_min_backoff_times_two_to_the_n(
    policy: BackoffPolicy, attempt: int, seed: int
) -> None:
    delay = backoff_delay(policy, attempt, rng=random.Random(seed))
    top = min(policy.max_backoff, policy.min_backoff * 2**attempt)
    if policy.jitter:
        assert policy.min_backoff <= delay <= top
    else:
        assert delay == min(policy.max_backoff, policy.min_backoff * 2 ** (attempt - 1))


def test_huge_attempt_numbers_do_not_overflow() -> None:
    policy = BackoffPolicy(min_backoff=timedelta(seconds=1), max_backoff=timedelta(hours=1))
    assert backoff_ceiling(policy, 10**6) == timedelta(hours=1)


def test_attempt_numbers_start_at_one() -> None:
    with pytest.raises(ValueError):
        backoff_ceiling(BackoffPolicy(), 0)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("120", timedelta(seconds=120)),  # delta-seconds
        (" 0 ", timedelta(0)),  # zero, with spaces
        ("Mon, 01 Jun 2026 12:01:30 GMT", timedelta(seconds=90)),  # an HTTP-date ahead
        ("Mon, 01 Jun 2026 11:00:00 GMT", timedelta(0)),  # an HTTP-date already past
        ("-5", None),  # negative: not delta-seconds
        ("soon", None),  # garbage
        ("", None),  # empty
        (None, None),  # absent
    ],
)
def test_retry_after_parsing(header: str | None, expected: timedelta | None) -> None:
    assert parse_retry_after(header, now=NOW) == expected
