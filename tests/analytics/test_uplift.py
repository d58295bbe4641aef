"""Proof of uplift: the sticky holdout, the two-proportion interval (and its coverage, by
simulation), cohorts in progress until their window closes, A/A verdicts, and the
self-normalised inverse-propensity estimate (and its coverage)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.analytics.uplift import (
    InvoiceOutcome,
    LoggedInvoice,
    cohort_uplift,
    in_holdout,
    snips,
    two_proportion_difference,
    uplift_arm,
)
from recoup.errors import InvalidInput

CUSTOMERS = [f"cus_{n}" for n in range(20_000)]


def test_the_holdout_is_about_a_tenth_of_customers_by_default() -> None:
    held = sum(in_holdout("t1", c) for c in CUSTOMERS)
    assert 0.09 < held / len(CUSTOMERS) < 0.11


@given(st.text(min_size=1), st.text(min_size=1), st.floats(0, 0.5), st.floats(0, 0.5))
def test_the_holdout_is_sticky_and_a_larger_share_only_adds_customers(
    tenant: str, customer: str, small: float, large: float
) -> None:
    small, large = sorted((small, large))
    assert in_holdout(tenant, customer, share=small) == in_holdout(tenant, customer, share=small)
    if in_holdout(tenant, customer, share=small):
        assert in_holdout(tenant, customer, share=large)


def test_holdouts_of_other_names_and_tenants_are_drawn_independently() -> None:
    first = {c for c in CUSTOMERS if in_holdout("t1", c)}
    assert first != {c for c in CUSTOMERS if in_holdout("t1", c, name="2027")}
    assert first != {c for c in CUSTOMERS if in_holdout("t2", c)}
    assert uplift_arm("t1", next(iter(first))) == "holdout"


@pytest.mark.parametrize("share", [-0.1, 0.6, float("nan"), True])
def test_a_share_out_of_range_is_refused(share: float) -> None:
    with pytest.raises(InvalidInput) as caught:
        in_holdout("t", "c", share=share)
    assert caught.value.field == "holdout_share"


def test_the_difference_matches_newcombes_worked_example() -> None:
    # Newcombe (1998), Table II, example (a): 56/70 against 48/80 → 0.2000 [0.0524, 0.3339].
    d = two_proportion_difference(56, 70, 48, 80)
    assert d.difference == pytest.approx(0.2)
    assert d.low == pytest.approx(0.0524, abs=5e-4)
    assert d.high == pytest.approx(0.3339, abs=5e-4)
    assert d.significant


def test_the_interval_stays_inside_minus_one_to_one_at_the_extremes() -> None:
    d = two_proportion_difference(10, 10, 0, 10)
    assert -1 <= d.low <= d.difference == 1.0 <= d.high <= 1
    with pytest.raises(InvalidInput):
        two_proportion_difference(1, 0, 1, 10)


def test_the_interval_covers_the_true_difference_at_about_the_nominal_rate() -> None:
    # 1,000 simulated experiments, 400 invoices in treatment and 100 in the holdout (a 20%
    # holdout), true rates 0.45 and 0.38: the 95% interval should cover 0.07 about 950 times.
    rng = random.Random(20)
    covered = 0
    runs = 1000
    for _ in range(runs):
        x1 = sum(rng.random() < 0.45 for _ in range(400))
        x2 = sum(rng.random() < 0.38 for _ in range(100))
        d = two_proportion_difference(x1, 400, x2, 100)
        covered += d.low <= 0.07 <= d.high
    assert 0.93 <= covered / runs <= 0.975


BASE = datetime(2026, 3, 1, tzinfo=UTC)


def outcomes(cohort: str, start: datetime, treated: tuple[int, int], held: tuple[int, int]):
    rows = []
    for arm, (recovered, total) in (("treatment", treated), ("holdout", held)):
        rows += [
            InvoiceOutcome(
                cohort=cohort,
                arm=arm,
                failed_at=start + timedelta(hours=i),
                recovered=i < recovered,
            )
            for i in range(total)
        ]
    return rows


def test_a_cohort_is_in_progress_until_its_last_window_closes() -> None:
    rows = outcomes("2026-03", BASE, (300, 500), (40, 100))
    last = max(r.failed_at for r in rows)
    during = cohort_uplift(rows, now=last + timedelta(days=29))
    after = cohort_uplift(rows, now=last + timedelta(days=30))
    assert during[0].in_progress and during[0].verdict.startswith("measurement in progress")
    assert not after[0].in_progress
    assert after[0].verdict.endswith(": uplift")
    assert after[0].difference is not None and after[0].difference.significant


def test_cohorts_are_reported_each_on_their_own() -> None:
    rows = outcomes("2026-03", BASE, (250, 500), (50, 100)) + outcomes(
        "2026-02", BASE - timedelta(days=28), (250, 500), (50, 100)
    )
    report = cohort_uplift(rows, now=BASE + timedelta(days=60))
    assert [c.cohort for c in report] == ["2026-02", "2026-03"]
    assert all(c.verdict.endswith("not significant") for c in report)


def test_an_aa_cohort_calls_a_significant_difference_a_false_positive() -> None:
    rows = outcomes("aa", BASE, (300, 500), (40, 100))
    (cohort,) = cohort_uplift(rows, now=BASE + timedelta(days=90), aa=True)
    assert cohort.aa and "false positive" in cohort.verdict


def test_an_empty_arm_gives_no_verdict() -> None:
    rows = outcomes("x", BASE, (3, 5), (0, 0))
    (cohort,) = cohort_uplift(rows, now=BASE + timedelta(days=90))
    assert cohort.difference is None and cohort.verdict.startswith("no verdict")


def test_snips_on_the_logging_policy_itself_is_the_observed_rate() -> None:
    logged = [LoggedInvoice(recovered=i % 4 == 0, decisions=((0.5, 0.5),)) for i in range(400)]
    estimate = snips(logged)
    assert estimate is not None
    assert estimate.value == pytest.approx(0.25)
    assert estimate.effective_invoices == pytest.approx(400)
    # p(1 − p)/n, the binomial variance, when every weight is 1
    assert estimate.high - estimate.value == pytest.approx(1.959964 * (0.25 * 0.75 / 400) ** 0.5)


def test_snips_without_support_gives_nothing() -> None:
    assert snips([LoggedInvoice(recovered=True, decisions=((0.9, 0.0),))]) is None
    with pytest.raises(InvalidInput):
        _ = LoggedInvoice(recovered=True, decisions=((0.0, 1.0),)).weight


def test_snips_recovers_a_candidates_value_with_its_nominal_coverage() -> None:
    # Logging: three slots with propensities 0.7 / 0.2 / 0.1 and success rates 0.20 / 0.35 /
    # 0.30; a candidate that takes the second slot 60% of the time and the third 40% recovers
    # 0.6 × 0.35 + 0.4 × 0.30 = 0.33. 1,000 invoices a run, 200 runs.
    rng = random.Random(3)
    propensities, rates, candidate = (0.7, 0.2, 0.1), (0.20, 0.35, 0.30), (0.0, 0.6, 0.4)
    true_value = 0.33
    covered, runs = 0, 200
    for _ in range(runs):
        logged = []
        for _ in range(1000):
            u = rng.random()
            slot = 0 if u < 0.7 else 1 if u < 0.9 else 2
            logged.append(
                LoggedInvoice(
                    recovered=rng.random() < rates[slot],
                    decisions=((propensities[slot], candidate[slot]),),
                )
            )
        estimate = snips(logged)
        assert estimate is not None
        covered += estimate.low <= true_value <= estimate.high
    assert covered / runs >= 0.90


def test_an_invoice_weighs_the_product_over_its_decisions() -> None:
    invoice = LoggedInvoice(recovered=True, decisions=((0.5, 1.0), (0.25, 0.5)))
    assert invoice.weight == pytest.approx(2.0 * 2.0)
