"""Learned timing in the runtime, on each backend: an adaptive tenant's own answered attempts
are read into its learner (incrementally), each new plan is made by the adaptive planner from
it, each decision is stored with its attempt, a held-out customer stays on the static plan, and
no stored plan breaks a guardrail of the policy, for any log and seed."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.analytics.uplift import in_holdout
from recoup.dunning.adaptive_counts import learner_state
from recoup.dunning.invoice import AttemptState, Invoice
from recoup.dunning.landing import customer_calendar
from recoup.dunning.limits import CardAttempt, limit_reason
from recoup.dunning.outcomes import Retry
from recoup.dunning.planner import Failure, plan_retries
from recoup.dunning.policy import parse_policy, preset_text
from recoup.dunning.taxonomy import classify, default_taxonomy
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.recovery.records import FailureReport
from recoup.recovery.service import Dunning
from recoup.timekeeping.clock import VirtualClock
from recoup.timekeeping.zones import to_local
from tests.dunning.test_adaptive_properties import records
from tests.storage.conftest import backend, store  # noqa: F401  (the per-backend fixtures)

START = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)  # a Tuesday, 10:00 in Chicago
TENANT = "default"
# The adaptive preset, learning from 20 answers on (the preset waits for 100).
QUICK = preset_text("adaptive").replace("min_attempts = 100", "min_attempts = 20")


def runtime(db: Any, policy_toml: str = QUICK) -> tuple[Dunning, VirtualClock]:
    clock = VirtualClock(START)
    scheduler = Scheduler(db, clock=clock, ssrf=SsrfGuard(allow_private=True))
    scheduler.default_tenant()
    dunning = Dunning(scheduler, db)
    dunning.configure(TENANT, charge_url="http://127.0.0.1:9/charge", policy_toml=policy_toml)
    return dunning, clock


def report(dunning: Dunning, n: int | str, at: datetime, **extra: Any) -> Invoice:
    fields: dict[str, Any] = {
        "invoice_id": f"in-{n}",
        "customer_id": f"cus-{n}",
        "amount": 1999,
        "currency": "usd",
        "failed_at": at,
        "timezone": "America/Chicago",
        "country": "US",
        "decline_code": "insufficient_funds",
    } | extra
    invoice, _ = dunning.report_failure(TENANT, FailureReport(**fields))
    return invoice


def treated(n: int) -> bool:
    return not in_holdout(TENANT, f"cus-{n}")


def teach(dunning: Dunning, clock: VirtualClock, count: int) -> None:
    """`count` invoices whose first attempt is answered: those landing in the afternoon
    (local) succeed, the others fail, so the log favours afternoons."""
    for n in range(count):
        invoice = report(dunning, n, clock.now())
        first = invoice.attempts[0]
        clock.set(max(clock.now(), first.at))
        local = to_local(first.at, "America/Chicago")
        ok = local.hour >= 14
        dunning.report_outcome(
            TENANT,
            invoice.invoice_id,
            first.attempt,
            "succeeded" if ok else "failed",
            decline_code=None if ok else "insufficient_funds",
        )


def test_a_cold_start_plans_the_static_schedule_and_records_each_decision(store: Any) -> None:  # noqa: F811
    dunning, _ = runtime(store)
    n = next(i for i in itertools.count() if treated(i))
    invoice = report(dunning, n, START)
    static = plan_retries(
        Failure(
            invoice=invoice.invoice_id,
            failed_at=START,
            timezone="America/Chicago",
            country="US",
            decline_code="insufficient_funds",
        ),
        parse_policy(QUICK),
    )
    assert isinstance(static, Retry)
    assert [a.at for a in invoice.attempts] == [a.at for a in static.attempts]
    for attempt in invoice.attempts:
        timing = attempt.timing
        assert timing is not None and timing.arm == "adaptive"
        assert timing.propensity == 1.0 and timing.slot == timing.static_slot
        assert "cold start: 0 attempts logged" in timing.explanation
    # Stored with the attempts, read back whole.
    assert store.get_invoice(TENANT, invoice.invoice_id) == invoice


def test_the_learner_reads_the_log_and_moves_attempts_to_the_better_slots(store: Any) -> None:  # noqa: F811
    dunning, clock = runtime(store)
    teach(dunning, clock, 60)
    dunning.learners.state(TENANT, 60)
    assert dunning.learners.answers(TENANT) == 60  # every answer, each counted once
    later = [report(dunning, f"late-{k}", clock.now()) for k in range(12)]
    assert dunning.learners.answers(TENANT) == 60
    timings = [
        a.timing for inv in later for a in inv.attempts if a.timing and a.timing.arm == "adaptive"
    ]
    assert timings, "some customer is treated"
    moved = [t for t in timings if t.moved]
    assert moved, [t.explanation for t in timings]
    for t in moved:
        assert 0 < t.propensity <= 1
        assert t.explanation.startswith(t.slot)
        assert f"for the static slot {t.static_slot}" in t.explanation
        assert t.figures["slot"]["band_start"] >= 14 * 60  # the afternoons the log favours
    stored = [store.get_invoice(TENANT, inv.invoice_id) for inv in later]
    assert stored == later  # every decision stored with its attempt


def test_the_learner_is_extended_not_read_again(store: Any) -> None:  # noqa: F811
    dunning, clock = runtime(store)
    reads: list[tuple[datetime, int]] = []
    original = store.learner_attempts

    def counting(tenant: str, *, since: datetime, limit: int = 10_000) -> Any:
        found = original(tenant, since=since, limit=limit)
        reads.append((since, len(found)))
        return found

    dunning.learners.store = type("Spy", (), {"learner_attempts": staticmethod(counting)})()
    teach(dunning, clock, 25)
    dunning.learners.state(TENANT, 60)
    assert dunning.learners.answers(TENANT) == 25
    # Once an answer is counted, every reading starts near the last answer read (never at the
    # beginning again), so the rows read stay about the answers (a look-back re-reads the
    # last ones): read from scratch each time, they would cost ~600 rows.
    first = next(i for i, (_, rows) in enumerate(reads) if rows)
    assert all(since >= START - timedelta(minutes=10) for since, _ in reads[first + 1 :])
    assert len(reads) > 25
    assert sum(rows for _, rows in reads) <= 25 + len(reads)


def test_a_held_out_customer_stays_on_the_static_plan(store: Any) -> None:  # noqa: F811
    dunning, clock = runtime(store)
    teach(dunning, clock, 40)
    held = next(n for n in itertools.count(1000) if not treated(n))
    invoice = report(dunning, held, clock.now())
    static = plan_retries(
        Failure(
            invoice=invoice.invoice_id,
            failed_at=clock.now(),
            timezone="America/Chicago",
            country="US",
            decline_code="insufficient_funds",
        ),
        parse_policy(QUICK),
    )
    assert isinstance(static, Retry)
    assert [a.at for a in invoice.attempts] == [a.at for a in static.attempts]
    for attempt in invoice.attempts:
        assert attempt.timing is not None and attempt.timing.arm == "holdout"
        assert attempt.timing.propensity == 1.0
        assert "holdout: 10% of customers" in attempt.timing.explanation


def test_a_card_update_re_plans_with_the_learner_and_records_the_prompt_retry(store: Any) -> None:  # noqa: F811
    dunning, clock = runtime(store)
    n = next(i for i in itertools.count() if treated(i))
    invoice = report(dunning, n, START)
    clock.set(START + timedelta(hours=2))
    updated = dunning.payment_method_updated(TENANT, invoice.invoice_id)
    fresh = [a for a in updated.attempts if a.state is AttemptState.SCHEDULED]
    assert fresh[0].timing is not None and fresh[0].timing.arm == "static"
    assert "prompt retry" in fresh[0].timing.explanation
    assert all(a.timing is not None and a.timing.arm == "adaptive" for a in fresh[1:])


def test_a_static_policy_records_no_decision(store: Any) -> None:  # noqa: F811
    dunning, _ = runtime(store, preset_text("business-days"))
    invoice = report(dunning, 1, START)
    assert invoice.attempts and all(a.timing is None for a in invoice.attempts)
    assert store.get_invoice(TENANT, invoice.invoice_id) == invoice


# -- the runtime-level property: the stored plan of an adaptive tenant vs the policy's limits --


@st.composite
def adaptive_tomls(draw: st.DrawFn) -> str:
    start = draw(st.sampled_from(["06:00", "08:00", "12:00", "17:00"]))
    end = draw(st.sampled_from(["14:00", "20:00", "24:00"]))
    if end <= start:
        end = "24:00"
    gaps = draw(st.sampled_from(["{ business_days = 1 }", "{ days = 2 }", "{ business_days = 3 }"]))
    return f"""
name = "adaptive-test"
gaps = [{gaps}, {{ business_days = 1 }}, {{ days = 3 }}, {{ business_days = 2 }}]
strategy = "adaptive"
[window]
start = "{draw(st.sampled_from(["07:00", "10:00", "21:00"]))}"
jitter_minutes = {draw(st.integers(0, 90))}
[limits]
min_gap_hours = {draw(st.sampled_from([0, 20, 40]))}
max_duration_days = {draw(st.integers(2, 21))}
[networks]
visa_max_reattempts_30d = {draw(st.integers(1, 4))}
mastercard_max_per_card_per_day = {draw(st.integers(1, 3))}
mastercard_max_per_merchant_amount_30d = {draw(st.integers(2, 6))}
[adaptive]
hours_start = "{start}"
hours_end = "{end}"
band_minutes = 60
shift_days = {draw(st.integers(0, 4))}
exploration = {draw(st.sampled_from([0.0, 0.3, 1.0]))}
prior_strength = {draw(st.sampled_from([2, 20]))}
min_attempts = 0
holdout_share = {draw(st.sampled_from([0, 0.1, 0.5]))}
propensity_draws = 10
"""


EXAMPLES = itertools.count()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    toml=adaptive_tomls(),
    rows=st.lists(records(), max_size=40),
    seed=st.integers(0, 2**63 - 1),
    hours=st.integers(0, 24 * 60),
    network=st.sampled_from(["visa", "mastercard", None]),
    code=st.sampled_from(["insufficient_funds", "do_not_honor", "try_again_later"]),
    zone=st.sampled_from(["America/Chicago", "Europe/Berlin", "Asia/Kolkata", "Pacific/Auckland"]),
)
def test_no_stored_adaptive_plan_breaks_a_guardrail(
    store: Any,  # noqa: F811
    toml: str,
    rows: list[Any],
    seed: int,
    hours: int,
    network: str | None,
    code: str,
    zone: str,
) -> None:
    dunning, clock = runtime(store, toml)
    state = learner_state(rows * 8)
    dunning.learners.state = lambda tenant, band: state  # type: ignore[method-assign]
    dunning.learners.seed_of = lambda tenant: seed
    failed_at = START + timedelta(hours=hours)
    clock.set(failed_at)
    key = f"p{next(EXAMPLES)}"
    invoice = report(
        dunning,
        key,
        failed_at,
        timezone=zone,
        country=None,
        decline_code=code,
        card_fingerprint=f"card-{key}",
        card_network=network,
        merchant_id="m",
    )
    policy = dunning.policy(TENANT)
    settings_ = policy.adaptive
    assert settings_ is not None
    failure = Failure(
        invoice=invoice.invoice_id,
        failed_at=failed_at,
        timezone=zone,
        decline_code=code,
        card=f"card-{key}",
        network=network,
        merchant_id="m",
        amount=1999,
    )
    static = plan_retries(failure, policy)
    stored = store.get_invoice(TENANT, invoice.invoice_id)
    assert stored == invoice
    attempts = stored.attempts
    if not isinstance(static, Retry):  # learning never adds an attempt
        assert attempts == ()
        return
    assert len(attempts) <= len(static.attempts)  # never more attempts than the static plan
    verdict = classify(code, ())
    gap = timedelta(hours=max(policy.min_gap_hours, verdict.min_delay_hours))
    instants = [failed_at, *(a.at for a in attempts)]
    for earlier, later in itertools.pairwise(instants):
        assert later - earlier >= gap and later > earlier
    calendar = customer_calendar(policy, None)
    card = [
        CardAttempt(
            card=f"card-{key}",
            at=failed_at,
            invoice=invoice.invoice_id,
            merchant_id="m",
            amount=1999,
            reattempt=False,
        )
    ]
    for attempt, fixed in zip(attempts, static.attempts, strict=False):
        timing = attempt.timing
        assert timing is not None and 0 < timing.propensity <= 1
        assert attempt.at - failed_at <= timedelta(seconds=policy.max_duration_seconds)
        if timing.arm == "holdout":
            assert attempt.at == fixed.at
        if attempt.at != fixed.at:  # moved: inside the allowed days and local hours
            local = to_local(attempt.at, zone)
            minute = local.hour * 60 + local.minute
            assert calendar.is_business_day(local.date()), local
            assert settings_.hours_start <= minute < settings_.hours_end, local
        others = card + [
            CardAttempt(
                card=f"card-{key}",
                at=a.at,
                invoice=invoice.invoice_id,
                merchant_id="m",
                amount=1999,
            )
            for a in attempts
            if a is not attempt
        ]
        reason = limit_reason(
            network=network,
            visa_category=verdict.visa_category,
            visa_limited=default_taxonomy().visa_limited_categories,
            limits=policy.networks,
            card=f"card-{key}",
            merchant_id="m",
            amount=1999,
            candidate=attempt.at,
            history=others,
        )
        assert reason is None, reason


def test_a_decision_is_reproduced_from_the_log_read_afresh_and_the_tenants_seed(
    store: Any,  # noqa: F811
) -> None:
    from recoup.dunning.learned_planning import Learning, plan_failure
    from recoup.recovery.learning import TenantLearners, tenant_seed

    dunning, clock = runtime(store)
    teach(dunning, clock, 40)
    n = next(i for i in itertools.count(2000) if treated(i))
    invoice = report(dunning, n, clock.now())
    # Another process reads the whole log from scratch: the same counts, the same plan.
    fresh = TenantLearners(store).state(TENANT, 60)
    assert dict(fresh.counts) == dict(dunning.learners.state(TENANT, 60).counts)
    again = plan_failure(
        Failure(
            invoice=invoice.invoice_id,
            failed_at=invoice.failed_at,
            timezone="America/Chicago",
            country="US",
            decline_code="insufficient_funds",
        ),
        parse_policy(QUICK),
        learning=Learning(state=fresh, seed=tenant_seed(TENANT)),
    )
    assert isinstance(again, Retry)
    assert [(a.at, a.timing) for a in again.attempts] == [
        (a.at, a.timing) for a in invoice.attempts
    ]
