"""Properties of any report: rates are rates, intervals hold them, and the counts add up."""

from __future__ import annotations

import json
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.analytics.recovery import (
    Bucket,
    RecoveryReport,
    ReportOptions,
    build_report,
    report_json,
)
from recoup.dunning.invoice import AttemptState, Invoice, InvoiceState
from tests.analytics.recovery.build import NOW, invoice

ZONES = ["UTC", "America/New_York", "Asia/Kolkata", "Pacific/Chatham", "America/Havana"]
CODES = ["insufficient_funds", "do_not_honor", "stolen_card", "expired_card", None, "zz_unknown"]
OUTCOMES = [s.value for s in AttemptState]


@st.composite
def invoices(draw: st.DrawFn) -> list[Invoice]:
    out = []
    for i in range(draw(st.integers(min_value=0, max_value=25))):
        steps = draw(
            st.lists(
                st.tuples(
                    st.floats(min_value=0, max_value=400),
                    st.sampled_from(OUTCOMES),
                    st.sampled_from(CODES),
                ),
                max_size=5,
            )
        )
        steps.sort(key=lambda s: s[0])
        state = draw(st.sampled_from([s.value for s in InvoiceState]))
        out.append(
            invoice(
                f"i{i}",
                steps,
                failed_at=NOW - timedelta(minutes=draw(st.integers(0, 60 * 24 * 60))),
                state=state,
                recovered_by=draw(st.sampled_from([None, "paid_out_of_band", "attempt:1"])),
                timezone=draw(st.sampled_from(ZONES)),
                decline_code=draw(st.sampled_from(CODES)),
                gateway=draw(st.sampled_from(["gw-a", "gw-b", None])),
                merchant_id=draw(st.sampled_from(["m-1", "m-2", "m-3", None])),
                policy=draw(st.sampled_from(["p", "q"])),
            )
        )
    return out


def every_bucket(r: RecoveryReport) -> list[Bucket]:
    out = [r.overall, r.hard_declines, *r.by_decline_category, *r.by_attempt]
    out += [*r.cumulative_by_attempt, *r.by_local_hour, *r.by_weekday, *r.by_decline_code]
    out += [*r.by_gateway, *r.by_merchant, *r.by_cohort, *(m.recovery for m in r.merchants)]
    if r.experiment is not None:
        out += [r.experiment.a.recovery, r.experiment.b.recovery]
    return out


def total(buckets: list[Bucket]) -> int:
    return sum(b.count for b in buckets)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(invoices(), st.integers(min_value=1, max_value=5), st.sampled_from([0.9, 0.95, 0.99]))
def test_rates_are_in_range_inside_their_intervals_and_counts_add_up(
    given_invoices: list[Invoice], min_volume: int, confidence: float
) -> None:
    r = build_report(
        given_invoices,
        options=ReportOptions(now=NOW, min_volume=min_volume, confidence=confidence),
    )
    for b in every_bucket(r):
        assert 0 <= b.recovered <= b.count
        assert b.insufficient_data == (b.count < min_volume)
        if b.count == 0:
            assert b.rate is None and b.low is None and b.high is None
        else:
            assert b.rate is not None and b.low is not None and b.high is not None
            assert 0.0 <= b.low <= b.rate <= b.high <= 1.0

    finished = sum(1 for i in given_invoices if i.state.is_judged)
    assert r.invoices == len(given_invoices) == r.finished + r.running + r.stopped
    assert r.finished == finished == r.overall.count
    assert sum(r.running_by_state.values()) == r.running
    assert r.overall.recovered == sum(r.recovered_by.values())
    for breakdown in (
        r.by_gateway,
        r.by_merchant,
        r.by_cohort,
        r.by_decline_code,
        r.by_decline_category,
    ):
        assert total(breakdown) == finished
        assert sum(b.recovered for b in breakdown) == r.overall.recovered
    assert total(r.by_local_hour) == total(r.by_weekday)
    assert total(r.by_attempt) == total(r.by_local_hour) + r.timing_excluded_attempts
    ran_on_finished = sum(
        1
        for i in given_invoices
        if i.state.is_judged
        for a in i.attempts
        if a.state in (AttemptState.SUCCEEDED, AttemptState.FAILED)
    )
    assert total(r.by_attempt) == ran_on_finished
    cumulative = [b.recovered for b in r.cumulative_by_attempt]
    assert cumulative == sorted(cumulative)
    assert all(b.count == finished for b in r.cumulative_by_attempt)
    if cumulative:
        assert cumulative[-1] == r.recovered_by["attempt"]

    load = r.load
    assert load.attempts == sum(load.per_minute.values()) == sum(load.per_hour.values())
    assert load.attempts == sum(load.by_utc_hour_of_day)
    assert all(n <= load.peak_per_minute for n in load.per_minute.values())
    assert all(n <= load.peak_per_hour for n in load.per_hour.values())
    assert load.peak_per_minute <= load.peak_per_hour

    low_volume = {m.merchant_id for m in r.merchants if m.low_volume}
    for spike in r.spikes:
        assert spike.current.low > spike.baseline.high
        assert spike.current.count <= spike.current.total
    assert {i.merchant_id for i in r.review_queue + r.suppressed} <= low_volume

    body = report_json(r)
    assert json.loads(json.dumps(body)) == body
