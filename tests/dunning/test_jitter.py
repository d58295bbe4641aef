"""Deterministic jitter: one function for the planner and the bulk replay."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from recoup.dunning import preset
from recoup.dunning.jitter import attempt_jitters, invoice_seeds, jitter_seconds

KEY = preset("business-days").fingerprint
SPAN = 90 * 60  # seconds


def test_the_seed_is_keyed_blake2b_of_the_invoice() -> None:
    expected = hashlib.blake2b(b"inv_1", digest_size=8, key=KEY).digest()
    assert int(invoice_seeds(["inv_1"], KEY)[0]) == int.from_bytes(expected, "little")


@given(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=30), st.integers(1, 8))
def test_bulk_jitter_equals_per_invoice_jitter(invoices: list[str], count: int) -> None:
    seeds = np.repeat(invoice_seeds(invoices, KEY), count)
    attempts = np.tile(np.arange(1, count + 1), len(invoices))
    bulk = jitter_seconds(seeds, attempts, SPAN).reshape(len(invoices), count).tolist()
    assert bulk == [attempt_jitters(inv, KEY, count, SPAN) for inv in invoices]
    assert all(0 <= j <= SPAN for row in bulk for j in row)


def test_jitter_differs_by_attempt_and_by_policy() -> None:
    assert len(set(attempt_jitters("inv_1", KEY, 4, SPAN))) > 1
    other = preset("calendar").fingerprint
    assert attempt_jitters("inv_1", KEY, 4, SPAN) != attempt_jitters("inv_1", other, 4, SPAN)


def test_jitter_spreads_over_the_whole_window() -> None:
    invoices = [f"inv_{i}" for i in range(20_000)]
    values = jitter_seconds(invoice_seeds(invoices, KEY), np.ones(20_000, dtype=np.int64), SPAN)
    per_quarter_hour = np.bincount(values // 900, minlength=7)[:6]
    assert per_quarter_hour.min() > 0.8 * per_quarter_hour.mean()


def test_no_jitter_span_means_no_jitter() -> None:
    assert attempt_jitters("inv_1", KEY, 3, 0) == [0, 0, 0]
