"""The worker's pure parts: the completion rule (an attempt's result → the completion to write),
the configuration's checks and the ledger's transitions. No store, no event loop."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.errors import InvalidInput
from recoup.jobs.model import BackoffPolicy, Job, RunOutcome
from recoup.jobs.targets import AttemptOutcome, AttemptResult
from recoup.jobs.worker import WorkerConfig, completion_for
from recoup.jobs.worker.config import worker_config
from recoup.jobs.worker.ledger import HeldState, Ledger, WorkerStats
from tests.jobs.support import claimed_job

Outcome = tuple[RunOutcome, datetime | None, str | None]  # a run's outcome, retry_at, error

START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
ENDED = START + timedelta(seconds=2)
NO_JITTER = BackoffPolicy(
    max_attempts=3,
    min_backoff=timedelta(seconds=10),
    max_backoff=timedelta(minutes=5),
    jitter=False,
)


def job(attempts: int, retry: BackoffPolicy = NO_JITTER) -> Job:
    return claimed_job(attempts, retry, run_at=START)


def complete(attempts: int, result: AttemptResult, retry: BackoffPolicy = NO_JITTER) -> Outcome:
    completion = completion_for(
        job(attempts, retry),
        result,
        started_at=START,
        finished_at=ENDED,
        worker_id="w",
        rng=random.Random(7),
    )
    run = completion.run
    return run.outcome, completion.retry_at, run.error


@pytest.mark.parametrize(
    ("attempts", "result", "expected"),
    [
        # success: no retry instant
        (1, AttemptResult(AttemptOutcome.SUCCEEDED), (RunOutcome.SUCCEEDED, None, None)),
        # a retryable failure with attempts left: the backoff runs from when the attempt ended
        (
            1,
            AttemptResult(AttemptOutcome.RETRY, error="502"),
            (RunOutcome.RETRY, ENDED + timedelta(seconds=10), "502"),
        ),
        (
            2,
            AttemptResult(AttemptOutcome.RETRY, error="502"),
            (RunOutcome.RETRY, ENDED + timedelta(seconds=20), "502"),
        ),
        # Retry-After beyond the backoff wins
        (
            1,
            AttemptResult(AttemptOutcome.RETRY, error="429", retry_after=timedelta(minutes=2)),
            (RunOutcome.RETRY, ENDED + timedelta(minutes=2), "429"),
        ),
        # the last attempt: a retryable failure fails, and says why
        (
            3,
            AttemptResult(AttemptOutcome.RETRY, error="502"),
            (RunOutcome.FAILED, None, "502 (attempts spent: 3 of 3)"),
        ),
        # a permanent failure fails at once, whatever attempts are left
        (
            1,
            AttemptResult(AttemptOutcome.FAILED, error="422"),
            (RunOutcome.FAILED, None, "422"),
        ),
    ],
)
def test_the_completion_rule(attempts: int, result: AttemptResult, expected: Outcome) -> None:
    assert complete(attempts, result) == expected


def test_a_completion_carries_the_attempt_its_instants_and_the_worker() -> None:
    result = AttemptResult(AttemptOutcome.SUCCEEDED, status_code=200, duration_ms=12.5)
    completion = completion_for(
        job(2), result, started_at=START, finished_at=ENDED, worker_id="w", rng=random.Random()
    )
    run = completion.run
    assert (run.job_id, run.attempt, run.started_at, run.finished_at) == ("job_1", 2, START, ENDED)
    assert (run.status_code, run.duration_ms, run.worker_id) == (200, 12.5, "w")
    assert completion.worker_id == "w"


def test_jitter_comes_from_the_rng_it_is_given() -> None:
    jittered = BackoffPolicy(max_attempts=5, min_backoff=timedelta(seconds=1))
    retry = AttemptResult(AttemptOutcome.RETRY)
    first = complete(3, retry, jittered)[1]
    assert first == complete(3, retry, jittered)[1]  # the same seed, the same instant
    assert ENDED + timedelta(seconds=1) <= first <= ENDED + timedelta(seconds=8)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"batch_size": 0}, "batch_size"),
        ({"lease": timedelta(0)}, "lease"),
        ({"lease": timedelta(seconds=3), "heartbeat_interval": timedelta(seconds=3)}, "heartbeat"),
        ({"session_beat": timedelta(0)}, "session_beat"),
        ({"session_grace": timedelta(seconds=1)}, "session_grace"),
        ({"dead_after": timedelta(seconds=1)}, "dead_after"),
    ],
)
def test_a_config_refuses_settings_that_cannot_work(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as refused:
        WorkerConfig(**options)
    assert refused.value.field == message or refused.value.field.startswith(message)


def test_knobs_by_name_make_the_config_and_are_refused_beside_one() -> None:
    made = worker_config(None, {"concurrency": 4, "worker_id": "w"})
    assert made == WorkerConfig(concurrency=4, worker_id="w")
    given = WorkerConfig(concurrency=2)
    assert worker_config(given, {}) is given
    with pytest.raises(InvalidInput, match="concurrency") as refused:
        worker_config(given, {"concurrency": 4})
    assert refused.value.field == "concurrency"
    with pytest.raises(TypeError, match="concurency"):
        worker_config(None, {"concurency": 4})


def test_a_configs_derived_settings_follow_the_lease_and_the_batch() -> None:
    config = WorkerConfig(lease=timedelta(seconds=9), batch_size=10, concurrency=50)
    assert (config.heartbeat_every, config.rescue_every) == (3.0, 4.5)
    assert config.lease_safe == pytest.approx(7.2)
    assert config.unstarted_limit == 50  # 2 × batch_size, at least concurrency
    assert WorkerConfig(prefetch=7).unstarted_limit == 7


def test_a_held_jobs_state_changes_through_the_ledgers_transitions() -> None:
    stats = WorkerStats()
    ledger = Ledger(stats)
    first = ledger.hold(job(0))
    assert first.state is HeldState.WAITING and ledger.unstarted == 1
    ledger.queue(first)
    assert first.state is HeldState.READY and list(ledger.ready) == [first]
    ledger.ready.popleft()
    ledger.start(first)
    assert first.state is HeldState.RUNNING
    assert (ledger.unstarted, ledger.running, stats.started) == (0, 1, 1)
    assert ledger.finish(first) and first.state is HeldState.DONE and not first.revoked
    assert (ledger.running, ledger.freed) == (0, 1)
    assert not ledger.finish(first)  # finished once only
    again = ledger.hold(job(1))  # the same job claimed again: its DONE attempt is not revoked
    assert ledger.held["job_1"] is again and stats.revoked == 0
    ledger.start(again)
    ledger.revoke(again)  # running: revoked, it still finishes (reported as revoked)
    assert again.state is HeldState.REVOKED and ledger.finish(again) and again.revoked
    waiting = ledger.hold(job(2))
    assert ledger.release_unstarted() == [waiting]
    assert waiting.state is HeldState.REVOKED and not ledger.held and ledger.unstarted == 0
