"""Tenant labels stay bounded however many tenants there are, and the totals stay whole."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from recoup.jobs.metrics import JobMetrics
from recoup.jobs.model import JobState
from recoup.jobs.tenant_metrics import OTHER, TenantJobsCollector, TenantLabels

TENANTS = st.text(alphabet="abcdefghij0123456789", min_size=1, max_size=6)
STATE_COUNTS = st.dictionaries(st.sampled_from(list(JobState)), st.integers(0, 10_000))


def test_the_first_tenants_seen_keep_their_names_and_later_ones_share_other() -> None:
    label = TenantLabels(limit=2)
    assert [label(t) for t in ("acme", "globex", "initech", "acme", "umbrella")] == [
        "acme",
        "globex",
        OTHER,
        "acme",
        OTHER,
    ]


class Counts:
    def __init__(self, counts: Mapping[str, Mapping[JobState, int]]) -> None:
        self.counts = counts
        self.reads = 0
        self.down = False

    def __call__(self) -> Mapping[str, Mapping[JobState, int]]:
        if self.down:
            raise OSError("the database is down")
        self.reads += 1
        return self.counts


def _scrape(collector: TenantJobsCollector) -> dict[tuple[str, str], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    found = {}
    for metric in registry.collect():
        for sample in metric.samples:
            found[sample.labels["tenant"], sample.labels["state"]] = sample.value
    return found


@given(st.dictionaries(TENANTS, STATE_COUNTS, max_size=30), st.integers(0, 8))
def test_the_largest_tenants_are_named_and_the_rest_summed_without_losing_a_job(
    counts: dict[str, dict[JobState, int]], limit: int
) -> None:
    scraped = _scrape(TenantJobsCollector(Counts(counts), limit=limit, ttl=60, monotonic=lambda: 0))
    named = {tenant for tenant, _ in scraped} - {OTHER}
    assert len(named) == min(limit, len(counts))
    assert (OTHER in {t for t, _ in scraped}) == (len(counts) > limit)
    for state in JobState:
        assert sum(v for (_, s), v in scraped.items() if s == state.value) == sum(
            c.get(state, 0) for c in counts.values()
        )
    totals = {t: sum(c.values()) for t, c in counts.items()}
    for tenant in named:  # nobody left out has more jobs than a tenant shown by name
        assert all(totals[tenant] >= totals[t] for t in counts if t not in named)


def test_tenant_counts_are_read_once_per_interval_and_an_outage_reads_again() -> None:
    counts, now = Counts({"acme": {JobState.SCHEDULED: 3}}), [0.0]
    collector = TenantJobsCollector(counts, ttl=300, monotonic=lambda: now[0])
    registry = CollectorRegistry()
    registry.register(collector)
    assert 'recoup_tenant_jobs{state="scheduled",tenant="acme"} 3.0' in (
        generate_latest(registry).decode()
    )
    now[0] = 299
    generate_latest(registry)
    assert counts.reads == 1
    now[0] = 300
    counts.down = True
    assert "recoup_tenant_jobs{" not in generate_latest(registry).decode()
    counts.down = False
    generate_latest(registry)
    assert counts.reads == 2


def test_job_metrics_register_tenant_jobs_only_when_given_the_count() -> None:
    without = JobMetrics(count_by_state=lambda: {})
    assert "recoup_tenant_jobs" not in generate_latest(without.registry).decode()
    with_tenants = JobMetrics(
        count_by_state=lambda: {}, count_by_tenant=lambda: {"acme": {JobState.FAILED: 2}}
    )
    text = generate_latest(with_tenants.registry).decode()
    assert 'recoup_tenant_jobs{state="failed",tenant="acme"} 2.0' in text
