"""What an adaptive policy learned, read from its stored decisions (`analytics.learned_timing`):
for any invoices and decisions the counts add up, the treated and held-out arms are the
invoices' first decisions' arms over judged invoices, and the uplift is theirs."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from recoup.analytics.learned_timing import learned_timing
from recoup.analytics.uplift import two_proportion_difference
from recoup.dunning.attempt_timing import AttemptTiming
from recoup.dunning.invoice import Invoice, InvoiceState
from tests.analytics.recovery.build import invoice

SLOTS = ["Monday 10:00–11:00 (other days)", "Thursday 18:00–19:00 (a payday)"]


@st.composite
def timings(draw: st.DrawFn) -> AttemptTiming:
    arm = draw(st.sampled_from(["adaptive", "holdout", "static"]))
    static = SLOTS[0]
    slot = draw(st.sampled_from(SLOTS)) if arm == "adaptive" else static
    return AttemptTiming(
        arm=arm,
        slot=slot,
        static_slot=static,
        propensity=draw(st.floats(0.01, 1)),
        explanation=f"{slot}: " + draw(st.sampled_from(["best estimate", "cold start: 0"])),
        figures={"estimate": draw(st.floats(0, 1)), "explored": draw(st.booleans())},
    )


@st.composite
def invoices(draw: st.DrawFn, n: int) -> Invoice:
    outcomes = draw(st.lists(st.sampled_from(["failed", "succeeded"]), min_size=1, max_size=4))
    built = invoice(
        f"in-{n}",
        [(24.0 * (k + 1), o, None) for k, o in enumerate(outcomes)],
        state=draw(st.sampled_from(["recovered", "exhausted", "retrying", "cancelled"])),
        decline_code=draw(st.sampled_from(["insufficient_funds", "do_not_honor"])),
    )
    attempts = tuple(replace(a, timing=draw(st.none() | timings())) for a in built.attempts)
    return replace(built, attempts=attempts)


@given(st.lists(st.integers(), max_size=30).flatmap(
    lambda ns: st.tuples(*(invoices(n) for n in range(len(ns))))
))  # fmt: skip
def test_the_counts_add_up_and_the_arms_are_the_first_decisions(found: tuple[Invoice, ...]) -> None:
    summary = learned_timing(found)
    decided = [t for i in found for a in i.attempts if (t := a.timing) is not None]
    if not decided:
        assert summary is None
        return
    assert summary is not None
    assert summary.decisions == len(decided) == sum(summary.by_arm.values())
    assert summary.adaptive == summary.by_arm.get("adaptive", 0)
    assert 0 <= summary.moved <= summary.adaptive and 0 <= summary.moved_share <= 1
    assert sum(s.decisions for s in summary.top_slots) <= summary.moved
    arms: dict[str, list[bool]] = {"adaptive": [], "holdout": []}
    for i in found:
        first = next((a.timing for a in i.attempts if a.timing is not None), None)
        if first is not None and first.arm in arms and i.state.is_judged:
            arms[first.arm].append(i.state is InvoiceState.RECOVERED)
    treated, held = arms["adaptive"], arms["holdout"]
    assert summary.treated == (sum(treated), len(treated))
    assert summary.held_out == (sum(held), len(held))
    if treated and held:
        assert summary.uplift == two_proportion_difference(
            sum(treated), len(treated), sum(held), len(held)
        )
    else:
        assert summary.uplift is None
    assert summary.as_json()["decisions"] == summary.decisions
