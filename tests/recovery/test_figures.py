"""The dunning figures of /metrics (`recoup.recovery.figures`): amounts land in the kind a
reader means, and the tenants beyond the limit are summed under `_other` with nothing lost."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from recoup.jobs.tenant_metrics import OTHER as JOBS_OTHER
from recoup.recovery.figures import (
    AMOUNT_KINDS,
    MONEY_KINDS,
    OTHER,
    bounded,
    figures_from_rows,
    money_by_currency,
)

STATES = ["retrying", "awaiting_customer", "recovered", "exhausted", "cancelled"]


def test_the_other_label_is_the_job_metrics_own() -> None:
    assert OTHER == JOBS_OTHER


def test_amounts_are_recovered_at_risk_or_lost_by_currency() -> None:
    figures = figures_from_rows(
        [
            ("acme", "retrying", "usd", 2, 3000),
            ("acme", "awaiting_customer", "usd", 1, 1000),
            ("acme", "exhausted", "EUR", 1, 700),
            ("acme", "recovered", "usd", 1, 999),
        ],
        [("acme", "failed", 3)],
        [("acme", 1)],
    )
    own = figures["acme"]
    assert own.amounts == {
        ("at_risk", "usd"): 4000,
        ("lost", "eur"): 700,
        ("recovered", "usd"): 999,
    }
    assert own.invoices["retrying"] == 2 and own.attempts == {"failed": 3}
    assert own.double_charges == 1


rows = st.lists(
    st.tuples(
        st.sampled_from(["t1", "t2", "t3", "t4", "t5"]),
        st.sampled_from(STATES),
        st.sampled_from(["usd", "eur"]),
        st.integers(1, 50),
        st.integers(1, 10**9),
    ),
    unique_by=lambda r: r[:3],
)


@given(rows=rows, limit=st.integers(0, 6))
def test_bounded_keeps_at_most_limit_names_and_every_total(
    rows: list[tuple[str, str, str, int, int]], limit: int
) -> None:
    figures = figures_from_rows(rows, [], [])
    total = sum(r[4] for r in rows)
    shown = bounded(figures, limit)
    assert len([t for t in shown if t != OTHER]) <= limit
    assert sum(sum(f.amounts.values()) for f in shown.values()) == total
    assert sum(sum(f.invoices.values()) for f in shown.values()) == sum(r[3] for r in rows)


@given(rows=rows)
def test_money_by_currency_keeps_every_amount_and_names_every_kind(
    rows: list[tuple[str, str, str, int, int]],
) -> None:
    for tenant, own in figures_from_rows(rows, [], []).items():
        money = money_by_currency(own)
        mine = [r for r in rows if r[0] == tenant]
        assert list(money) == sorted({r[2] for r in mine})  # currencies in order, each once
        for currency, kinds in money.items():
            assert tuple(kinds) == MONEY_KINDS  # 0 shown rather than left out
            for kind in MONEY_KINDS:
                expected = sum(
                    r[4] for r in mine if r[2] == currency and AMOUNT_KINDS[r[1]] == kind
                )
                assert kinds[kind] == expected
