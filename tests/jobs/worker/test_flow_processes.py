"""Flow control across two `recoup worker` processes on one database, on both backends
(`bench/bench_flow.py`, bounded): no one-second window holds more starts than a key's rate,
and no moment more running jobs than its parallelism."""

from __future__ import annotations

import pytest

from bench.bench_flow import defaults, run_backend

pytestmark = pytest.mark.slow


def bounded_run(backend: str, dsn: str | None = None) -> dict[str, object]:
    args = defaults()
    args.jobs, args.rate = 300, 100
    args.par_jobs, args.parallelism = 40, 3
    args.keys = 0
    return run_backend(backend, args, cost=False, dsn=dsn)


def check(found: dict[str, object]) -> None:
    assert found["rate_runs"] == 300 and found["par_runs"] == 40, found
    assert found["rate_max_window"] <= 100, found  # type: ignore[operator]
    assert found["rate_max_window"] >= 80, found  # type: ignore[operator]  # and it runs near it
    assert found["par_max"] == 3, found


def test_two_sqlite_workers_hold_a_keys_rate_and_parallelism() -> None:
    check(bounded_run("sqlite"))


@pytest.mark.postgres
def test_two_postgres_workers_hold_a_keys_rate_and_parallelism(postgres_url: str) -> None:
    check(bounded_run("postgres", postgres_url))
