"""Two policies compared in the report: per-arm recovery, significance, invoices still needed."""

from __future__ import annotations

import pytest

from recoup.analytics.recovery import ReportOptions, build_report
from recoup.dunning.invoice import Invoice
from tests.analytics.recovery.build import NOW, invoice


def arm(policy: str, recovered: int, finished: int, running: int = 0) -> list[Invoice]:
    out = [
        invoice(
            f"{policy}-{i}", [(24, "succeeded" if i < recovered else "failed", None)], policy=policy
        )
        for i in range(finished)
    ]
    out += [
        invoice(f"{policy}-run-{i}", [(24, "scheduled", None)], state="retrying", policy=policy)
        for i in range(running)
    ]
    return out


def test_a_difference_not_yet_significant_says_how_many_more_invoices_it_needs() -> None:
    invoices = arm("nightly", 50, 100) + arm("local-10am", 60, 100, running=7)
    e = build_report(invoices, options=ReportOptions(now=NOW)).experiment
    assert e is not None
    assert (e.a.policy, e.b.policy) == ("local-10am", "nightly")  # auto: the two, by name
    assert (e.a.recovery.recovered, e.a.recovery.count, e.a.running) == (60, 100, 7)
    assert e.difference == pytest.approx(-0.10)
    assert e.p_value == pytest.approx(0.1552, abs=5e-4)
    assert not e.significant
    assert e.needed_per_arm == 388  # 50% against 60% at 95% and 80% power
    assert (e.more_needed_a, e.more_needed_b) == (288, 288)


def test_a_significant_difference_needs_no_more() -> None:
    invoices = arm("a", 50, 100) + arm("b", 80, 100)
    e = build_report(invoices, options=ReportOptions(now=NOW, experiment=("a", "b"))).experiment
    assert e is not None and e.significant
    assert e.p_value is not None and e.p_value < 0.001
    assert e.difference == pytest.approx(0.30)
    assert (e.more_needed_a, e.more_needed_b) == (0, 0)


def test_a_stricter_confidence_can_turn_significance_off() -> None:
    invoices = arm("a", 45, 100) + arm("b", 60, 100)  # p = 0.0337
    loose = build_report(invoices, options=ReportOptions(now=NOW, confidence=0.95)).experiment
    strict = build_report(invoices, options=ReportOptions(now=NOW, confidence=0.99)).experiment
    assert loose is not None and strict is not None
    assert loose.significant and not strict.significant
    assert strict.more_needed_a is not None and strict.more_needed_a > 0


def test_equal_rates_cannot_say_how_many_more() -> None:
    e = build_report(arm("a", 5, 10) + arm("b", 5, 10), options=ReportOptions(now=NOW)).experiment
    assert e is not None and not e.significant
    assert e.needed_per_arm is None and e.more_needed_a is None


def test_the_experiment_is_automatic_only_with_exactly_two_policies() -> None:
    one = build_report(arm("a", 1, 2), options=ReportOptions(now=NOW))
    three = build_report(
        arm("a", 1, 2) + arm("b", 1, 2) + arm("c", 1, 2), options=ReportOptions(now=NOW)
    )
    assert one.experiment is None and three.experiment is None
    chosen = build_report(
        arm("a", 1, 2) + arm("b", 1, 2) + arm("c", 2, 2),
        options=ReportOptions(now=NOW, experiment=("c", "a")),
    ).experiment
    assert chosen is not None and (chosen.a.policy, chosen.b.policy) == ("c", "a")


def test_an_arm_with_no_finished_invoice_has_no_comparison_yet() -> None:
    invoices = arm("a", 3, 5) + arm("b", 0, 0, running=4)
    e = build_report(invoices, options=ReportOptions(now=NOW, experiment=("a", "b"))).experiment
    assert e is not None
    assert e.difference is None and e.p_value is None and not e.significant
    assert e.b.running == 4 and e.b.recovery.count == 0
