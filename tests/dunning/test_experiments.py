"""The deterministic split of invoices between two policies."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.dunning.experiments import arm_fraction, assign_arm
from recoup.errors import InvalidInput


def test_the_same_invoice_always_lands_in_the_same_arm() -> None:
    arms = [assign_arm("acme", f"inv_{i}", "spring", 0.5) for i in range(200)]
    assert arms == [assign_arm("acme", f"inv_{i}", "spring", 0.5) for i in range(200)]
    assert set(arms) == {"a", "b"}


def test_the_split_is_the_same_in_another_process_with_another_hash_seed() -> None:
    code = (
        "from recoup.dunning.experiments import assign_arm;"
        "print(''.join(assign_arm('acme', f'inv_{i}', 'spring', 0.5) for i in range(64)))"
    )
    here = "".join(assign_arm("acme", f"inv_{i}", "spring", 0.5) for i in range(64))
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert done.stdout.strip() == here


def test_the_names_are_hashed_apart() -> None:
    # Length prefixes: moving a character from one name to the next changes the point.
    assert arm_fraction("ab", "c", "x") != arm_fraction("a", "bc", "x")
    assert arm_fraction("acme", "inv_1", "spring") != arm_fraction("acme", "inv_1", "autumn")


def test_the_edges_of_the_share() -> None:
    ids = [f"inv_{i}" for i in range(500)]
    assert {assign_arm("t", i, "e", 0.0) for i in ids} == {"a"}
    assert {assign_arm("t", i, "e", 1.0) for i in ids} == {"b"}


@pytest.mark.parametrize("share", [-0.1, 1.5, float("nan"), True])
def test_a_share_outside_zero_to_one_is_refused(share: float) -> None:
    with pytest.raises(InvalidInput, match="share_b"):
        assign_arm("t", "inv", "e", share)


@settings(max_examples=40, deadline=None)
@given(
    share=st.floats(min_value=0.05, max_value=0.95),
    experiment=st.text(min_size=1, max_size=12),
    tenant=st.text(min_size=1, max_size=8),
)
def test_the_split_is_balanced_within_a_binomial_bound(
    share: float, experiment: str, tenant: str
) -> None:
    n = 4000
    in_b = sum(assign_arm(tenant, f"inv_{i}", experiment, share) == "b" for i in range(n))
    # A fair split puts Binomial(n, share) invoices in b; 5 standard deviations is a bound
    # a good hash misses about once in 3.5 million draws.
    assert abs(in_b - n * share) <= 5 * math.sqrt(n * share * (1 - share))


@settings(max_examples=30, deadline=None)
@given(low=st.floats(min_value=0, max_value=1), high=st.floats(min_value=0, max_value=1))
def test_raising_the_share_only_moves_invoices_from_a_to_b(low: float, high: float) -> None:
    low, high = min(low, high), max(low, high)
    for i in range(300):
        if assign_arm("t", f"inv_{i}", "e", low) == "b":
            assert assign_arm("t", f"inv_{i}", "e", high) == "b"
