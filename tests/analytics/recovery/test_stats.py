"""The statistics against published values: Wilson intervals (Newcombe 1998, table I, method 3),
the two-proportion z-test and the two-proportion sample size."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.analytics.recovery.stats import (
    needed_per_arm,
    two_proportion_p_value,
    wilson,
    z_two_sided,
)
from recoup.errors import InvalidInput


@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        (81, 263, 0.2553, 0.3662),  # Newcombe 1998, example (a)
        (15, 148, 0.0624, 0.1605),  # example (b)
        (0, 20, 0.0000, 0.1611),  # example (c): zero successes still has a width
        (1, 29, 0.0061, 0.1718),  # example (d)
    ],
)
def test_wilson_matches_newcombes_table(
    successes: int, trials: int, low: float, high: float
) -> None:
    interval = wilson(successes, trials, 0.95)
    assert interval.low == pytest.approx(low, abs=5e-5)
    assert interval.high == pytest.approx(high, abs=5e-5)


def test_wilson_with_no_trials_knows_nothing() -> None:
    assert (wilson(0, 0).low, wilson(0, 0).high) == (0.0, 1.0)


def test_wilson_of_all_successes_ends_at_one() -> None:
    interval = wilson(20, 20)
    assert interval.high == 1.0 and interval.low == pytest.approx(1 - 0.1611, abs=5e-5)


def test_a_higher_confidence_gives_a_wider_interval() -> None:
    narrow, wide = wilson(30, 100, 0.90), wilson(30, 100, 0.99)
    assert wide.low < narrow.low < 0.3 < narrow.high < wide.high


def test_z_for_the_usual_confidences() -> None:
    assert z_two_sided(0.95) == pytest.approx(1.959964, abs=1e-6)
    assert z_two_sided(0.99) == pytest.approx(2.575829, abs=1e-6)


@pytest.mark.parametrize("confidence", [0.3, 1.0, 1.5, -0.1])
def test_a_confidence_outside_half_to_one_is_refused(confidence: float) -> None:
    with pytest.raises(InvalidInput, match="confidence"):
        wilson(1, 2, confidence)


def test_impossible_counts_are_refused() -> None:
    with pytest.raises(InvalidInput):
        wilson(3, 2)


def test_two_proportion_p_value() -> None:
    # 50/100 against 60/100: pooled 0.55, z = 0.1 / √(0.55·0.45·0.02) = 1.4213, p = 0.1552.
    assert two_proportion_p_value(50, 100, 60, 100) == pytest.approx(0.1552, abs=5e-4)
    # 45/100 against 60/100: z = 2.1240, p = 0.0337.
    assert two_proportion_p_value(45, 100, 60, 100) == pytest.approx(0.0337, abs=5e-4)
    assert two_proportion_p_value(50, 100, 50, 100) == pytest.approx(1.0)


def test_two_proportion_p_value_needs_two_arms_and_variance() -> None:
    assert two_proportion_p_value(0, 0, 5, 10) is None
    assert two_proportion_p_value(10, 10, 20, 20) is None  # everything recovered: no variance


def test_needed_per_arm_is_the_textbook_388_for_half_against_sixty_percent() -> None:
    # Fleiss without continuity correction, α = 0.05 two-sided, 80% power: 387.3 → 388.
    assert needed_per_arm(0.5, 0.6, 0.95) == 388
    assert needed_per_arm(0.6, 0.5, 0.95) == 388  # symmetric


def test_needed_per_arm_grows_as_the_difference_shrinks_and_is_none_at_zero() -> None:
    wide = needed_per_arm(0.3, 0.5, 0.95)
    close = needed_per_arm(0.3, 0.35, 0.95)
    assert wide is not None and close is not None and close > wide
    assert needed_per_arm(0.4, 0.4, 0.95) is None


@given(
    st.integers(min_value=0, max_value=10_000).flatmap(
        lambda n: st.tuples(st.integers(min_value=0, max_value=n), st.just(n))
    ),
    st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_a_wilson_interval_holds_its_rate_inside_zero_to_one(
    counts: tuple[int, int], confidence: float
) -> None:
    successes, trials = counts
    interval = wilson(successes, trials, confidence)
    assert 0.0 <= interval.low <= interval.high <= 1.0
    if trials:
        assert interval.low <= successes / trials <= interval.high
        assert interval.high - interval.low > 0
    assert not math.isnan(interval.low + interval.high)
