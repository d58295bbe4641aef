"""The demo's customers: the same for the same seed, a month of renewals that really fail, and
the mixes they are drawn from, within sampling error."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.demo import mixes
from recoup.demo.population import (
    CLOCK_START,
    MONTH_DAYS,
    MONTH_START,
    Customer,
    first_retry_key,
    generate,
)
from recoup.dunning.taxonomy import DeclineClass, classify
from recoup.payments import FaultKind
from recoup.timekeeping.zones import to_local

MONTH_END = MONTH_START + timedelta(days=MONTH_DAYS)


def local_month(c: Customer) -> tuple[int, int]:
    local = to_local(c.failed_at, c.timezone)
    return local.year, local.month


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**31), size=st.integers(min_value=1, max_value=60))
def test_every_renewal_fails_in_the_month_and_what_follows_comes_after(
    seed: int, size: int
) -> None:
    customers = generate(seed, size)
    assert generate(seed, size) == customers  # the same seed, the same customers
    assert len({c.invoice_id for c in customers}) == size
    assert [c.failed_at for c in customers] == sorted(c.failed_at for c in customers)
    for c in customers:
        assert local_month(c) == (2026, 10)  # October, in the customer's zone
        assert CLOCK_START <= c.failed_at < MONTH_END + timedelta(days=1)
        assert c.amount > 0 and len(c.currency) == 3
        # The renewal's own charge is the card's first try, and it is declined.
        assert c.scenario().declines_at(c.failed_at, first_try=c.failed_at, updated_at=None)
        for later in (c.card_updated_at, c.paid_out_of_band_at):
            assert later is None or later > c.failed_at
        assert (c.card_updated_at is not None) <= (c.outlook == "update")
        fault = c.injected_fault()
        if fault is not None:
            assert fault.idempotency_key == first_retry_key(c.invoice_id) and fault.times == 1
            assert fault.kind in set(FaultKind)


def test_the_mix_follows_the_tables_within_sampling_error() -> None:
    customers = generate(2026, 5000)
    n = len(customers)
    codes = Counter(c.decline_code for c in customers)
    total = sum(w for _, w, _ in mixes.DECLINES)
    for code, weight, _ in mixes.DECLINES:
        assert abs(codes[code] / n - weight / total) < 0.02, code
    soft = sum(
        1 for c in customers if classify(c.decline_code, ()).decline_class is DeclineClass.SOFT
    )
    assert soft / n > 0.88  # generic, NSF and temporary declines: ~90 % of initial failures
    zones = Counter(c.timezone for c in customers)
    zone_total = sum(w for _, _, w in mixes.ZONES)
    for zone, _, weight in mixes.ZONES:
        assert abs(zones[zone] / n - weight / zone_total) < 0.02, zone
    assert 0.01 < sum(c.paid_out_of_band_at is not None for c in customers) / n < 0.05
    faults = Counter(c.fault for c in customers if c.fault)
    assert set(faults) == {kind for kind, _, _ in mixes.FAULTS}
    updated = [c for c in customers if c.decline_code == "expired_card"]
    assert 0.6 < sum(c.card_updated_at is not None for c in updated) / len(updated) < 0.8


def test_with_a_world_the_same_customers_follow_its_odds_on_soft_declines() -> None:
    plain, timed = generate(9, 300), generate(9, 300, world_odds=True)
    assert [c.invoice_id for c in plain] == [c.invoice_id for c in timed]
    for before, after in zip(plain, timed, strict=True):
        assert after.failed_at == before.failed_at and after.outlook == before.outlook
        scenario = after.scenario()
        if after.outlook in ("clears", "payday", "never"):
            assert scenario.world_odds
            assert (scenario.timezone, scenario.country) == (after.timezone, after.country)
            assert scenario.network == after.network
            # The clearing rules stand beside the odds.
            assert scenario.clears_after == before.scenario().clears_after
        else:  # hard declines and card updates never recover by timing
            assert not scenario.world_odds
            assert scenario == before.scenario()
