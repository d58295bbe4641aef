"""Retry delays: exponential backoff with jitter, capped, honouring `Retry-After`. Pure.

The rule, for the attempt numbered `n` (1-based: the first attempt is 1) that has just failed
with a retryable error, under a policy with `min_backoff = b` and `max_backoff = c`:

    delay(n) = uniform(b, min(c, b · 2^n))       # with jitter ("full jitter" above the floor)
    delay(n) = min(c, b · 2^(n−1))               # without jitter: b, 2b, 4b, … up to c

So every delay lies in `[b, c]`, and with jitter even the first retry is spread over
`[b, 2b]`: jobs that failed together (a target's outage) do not all retry at one instant. The
jittered range of attempt n ends where the unjittered delay of attempt n + 1 is, so the mean
still grows by ×2 per attempt. The floor is `b` rather than 0 (AWS's "full jitter" draws from
`[0, ceiling]`) because a zero delay means no backoff at all (akash-network/console#3727).

A target's `Retry-After` (delta-seconds or an HTTP-date, RFC 9110 §10.2.3) is a lower bound:
the delay is the later of the backoff and `Retry-After`. So that a target cannot park a job
for ever, `Retry-After` is honoured only up to `max(c, RETRY_AFTER_LIMIT)`.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from recoup.jobs.model import BackoffPolicy

RETRY_AFTER_LIMIT = timedelta(hours=1)  # the longest Retry-After honoured beyond max_backoff
_MAX_DOUBLINGS = 62  # 2^62 · any useful min_backoff exceeds every max_backoff; avoids overflow


def backoff_ceiling(policy: BackoffPolicy, attempt: int) -> timedelta:
    """The longest delay after `attempt`: `min(max_backoff, min_backoff · 2^attempt)` with
    jitter, `min(max_backoff, min_backoff · 2^(attempt−1))` (the delay itself) without."""
    if attempt < 1:
        raise ValueError(f"attempt numbers start at 1, got {attempt}")
    doublings = min(attempt if policy.jitter else attempt - 1, _MAX_DOUBLINGS)
    ceiling_s = policy.min_backoff.total_seconds() * (2**doublings)
    return min(policy.max_backoff, timedelta(seconds=min(ceiling_s, 1e9)))


def backoff_delay(
    policy: BackoffPolicy,
    attempt: int,
    *,
    rng: random.Random | None = None,
    retry_after: timedelta | None = None,
) -> timedelta:
    """The delay before retrying after attempt number `attempt` failed (see the module rule).

    `rng` supplies the jitter (pass a seeded `random.Random` for reproducible results; the
    module's shared generator otherwise). `retry_after` is the target's `Retry-After`, already
    converted to a duration (see `parse_retry_after`)."""
    ceiling = backoff_ceiling(policy, attempt)
    floor = policy.min_backoff
    if policy.jitter and ceiling > floor:
        draw = (rng or random).uniform(floor.total_seconds(), ceiling.total_seconds())
        delay = min(ceiling, max(floor, timedelta(seconds=draw)))
    else:
        delay = ceiling
    if retry_after is not None and retry_after > delay:
        delay = min(retry_after, max(policy.max_backoff, RETRY_AFTER_LIMIT))
    return delay


def parse_retry_after(value: str | None, *, now: datetime) -> timedelta | None:
    """A `Retry-After` header as a duration from `now`: delta-seconds (`120`) or an HTTP-date
    (`Wed, 21 Oct 2026 07:28:00 GMT`). A date in the past gives zero; anything unparsable (or
    absent) gives None, and the backoff alone decides."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isdigit():
        return timedelta(seconds=min(int(text), 10**9))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; `-0000` parses as naive
        when = when.replace(tzinfo=UTC)
    return max(timedelta(0), when - now)


__all__ = ["RETRY_AFTER_LIMIT", "backoff_ceiling", "backoff_delay", "parse_retry_after"]
