"""The store's gauges: right values, read through the cheap live counts, cached between reads."""

from __future__ import annotations

from collections import Counter

from prometheus_client import generate_latest

from recoup.jobs.metrics import FINAL_TTL, LIVE_TTL, JobMetrics
from recoup.jobs.model import JobState


class FakeStore:
    """Counts of a pretend table, and how often each was read."""

    def __init__(self) -> None:
        self.states = dict.fromkeys(JobState, 0)
        self.backlog = 0
        self.reads: Counter[str] = Counter()
        self.down = False

    def count_by_state(self) -> dict[JobState, int]:
        self._read("count_by_state")
        return dict(self.states)

    def count_live(self) -> dict[JobState, int]:
        self._read("count_live")
        return {s: self.states[s] for s in (JobState.SCHEDULED, JobState.RUNNING)}

    def due_backlog(self) -> int:
        self._read("due_backlog")
        return self.backlog

    def _read(self, what: str) -> None:
        if self.down:
            raise OSError("the database is down")
        self.reads[what] += 1


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _metrics(store: FakeStore, clock: FakeMonotonic) -> JobMetrics:
    return JobMetrics(
        count_by_state=store.count_by_state,
        due_backlog=store.due_backlog,
        count_live=store.count_live,
        monotonic=clock,
    )


def _gauges(metrics: JobMetrics) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith(("recoup_jobs{", "recoup_jobs_due ")):
            name, value = line.rsplit(" ", 1)
            found[name] = float(value)
    return found


def test_the_first_scrape_reads_every_state_and_registering_reads_nothing() -> None:
    store, clock = FakeStore(), FakeMonotonic()
    store.states.update({JobState.SCHEDULED: 7, JobState.RUNNING: 2, JobState.SUCCEEDED: 40})
    store.backlog = 3
    metrics = _metrics(store, clock)
    assert store.reads == Counter()  # the collector describes itself without collecting
    assert _gauges(metrics) == {
        'recoup_jobs{state="scheduled"}': 7,
        'recoup_jobs{state="running"}': 2,
        'recoup_jobs{state="succeeded"}': 40,
        'recoup_jobs{state="failed"}': 0,
        'recoup_jobs{state="cancelled"}': 0,
        "recoup_jobs_due": 3,
    }
    assert store.reads == Counter(count_by_state=1, due_backlog=1)


def test_scrapes_within_the_live_interval_are_answered_from_memory() -> None:
    store, clock = FakeStore(), FakeMonotonic()
    metrics = _metrics(store, clock)
    first = _gauges(metrics)
    store.states[JobState.SCHEDULED] = 5
    for _ in range(10):
        clock.now += (LIVE_TTL - 1) / 10
        assert _gauges(metrics) == first
    assert store.reads == Counter(count_by_state=1, due_backlog=1)


def test_live_states_refresh_through_count_live_and_final_states_less_often() -> None:
    store, clock = FakeStore(), FakeMonotonic()
    metrics = _metrics(store, clock)
    _gauges(metrics)
    store.states.update({JobState.SCHEDULED: 5, JobState.RUNNING: 1, JobState.FAILED: 9})
    store.backlog = 4
    clock.now += LIVE_TTL
    after_live = _gauges(metrics)
    assert after_live['recoup_jobs{state="scheduled"}'] == 5
    assert after_live['recoup_jobs{state="running"}'] == 1
    assert after_live["recoup_jobs_due"] == 4
    assert after_live['recoup_jobs{state="failed"}'] == 0  # final states: not re-read yet
    assert store.reads == Counter(count_by_state=1, count_live=1, due_backlog=2)
    clock.now += FINAL_TTL
    assert _gauges(metrics)['recoup_jobs{state="failed"}'] == 9
    assert store.reads["count_by_state"] == 2 and store.reads["count_live"] == 1


def test_a_database_outage_empties_the_scrape_and_the_next_one_reads_again() -> None:
    store, clock = FakeStore(), FakeMonotonic()
    metrics = _metrics(store, clock)
    store.down = True
    assert _gauges(metrics) == {}
    store.down = False
    store.states[JobState.SCHEDULED] = 1
    assert _gauges(metrics)['recoup_jobs{state="scheduled"}'] == 1


def test_without_count_live_the_live_states_come_from_a_full_count() -> None:
    store, clock = FakeStore(), FakeMonotonic()
    metrics = JobMetrics(count_by_state=store.count_by_state, monotonic=clock)
    _gauges(metrics)
    store.states[JobState.RUNNING] = 3
    clock.now += LIVE_TTL
    assert _gauges(metrics)['recoup_jobs{state="running"}'] == 3
    assert "recoup_jobs_due" not in _gauges(metrics)
