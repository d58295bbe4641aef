"""Policy experiments in the runtime, on each backend: a tenant's second policy and its share
are settings; each new invoice is planned with its arm's policy (a deterministic draw per
invoice) and records that policy's name; every later transition follows the same policy."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recoup.dunning.experiments import assign_arm
from recoup.dunning.failure import ChargeFailure
from recoup.dunning.invoice import AttemptState, Invoice
from recoup.dunning.lifecycle import Opening
from recoup.dunning.planner import Retry, plan_retries
from recoup.dunning.policy import DunningPolicy, parse_policy, preset
from recoup.errors import ConfigError, InvalidInput
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.recovery.records import KEEP, FailureReport
from recoup.recovery.service import Dunning
from recoup.timekeeping.clock import VirtualClock
from tests.storage.conftest import backend, store  # noqa: F401  (the per-backend fixtures)

START = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)  # a Tuesday
TENANT = "default"
EVENING = """
name = "evening-two-tries"
gaps = [{ business_days = 2 }, { business_days = 2 }]
[window]
start = "18:00"
jitter_minutes = 30
"""


@pytest.fixture
def dunning(store: Any) -> Dunning:  # noqa: F811
    clock = VirtualClock(START)
    scheduler = Scheduler(store, clock=clock, ssrf=SsrfGuard(allow_private=True))
    scheduler.default_tenant()
    found = Dunning(scheduler, store)
    found.configure(TENANT, charge_url="http://127.0.0.1:9/charge")
    return found


def fail(dunning: Dunning, invoice_id: str, *, decline: str = "insufficient_funds") -> Invoice:
    invoice, _ = dunning.report_failure(
        TENANT,
        FailureReport(
            invoice_id=invoice_id,
            customer_id=f"cus_{invoice_id}",
            amount=1999,
            currency="usd",
            failed_at=START,
            timezone="America/Chicago",
            country="US",
            decline_code=decline,
        ),
    )
    return invoice


def planned(invoice: Invoice, policy: DunningPolicy) -> list[datetime]:
    """The attempt instants `policy` plans for the invoice's failure."""
    opening = Opening(
        tenant=invoice.tenant,
        failure=ChargeFailure(
            invoice_id=invoice.invoice_id,
            customer_id=invoice.customer_id,
            amount=invoice.amount,
            currency=invoice.currency,
            failed_at=invoice.failed_at,
            timezone=invoice.timezone,
            country=invoice.country,
            decline_code=invoice.decline_code,
            advice_code=invoice.advice_code,
            card_fingerprint=None,
            card_network=None,
            gateway=None,
            merchant_id=None,
        ),
        charge_url=invoice.charge_url,
        policy=policy,
    )
    decision = plan_retries(opening.failure.for_planner(), policy)
    assert isinstance(decision, Retry)
    return [a.at for a in decision.attempts]


def test_each_invoice_is_planned_with_its_arms_policy_and_records_its_name(
    dunning: Dunning,
) -> None:
    dunning.configure(
        TENANT,
        experiment_name="evening",
        experiment_policy_toml=EVENING,
        experiment_share=0.5,
    )
    arm_a, arm_b = preset("business-days"), parse_policy(EVENING)
    invoices = [fail(dunning, f"inv_{n}") for n in range(60)]
    arms = Counter()
    for invoice in invoices:
        arm = assign_arm(TENANT, invoice.invoice_id, "evening", 0.5)
        arms[arm] += 1
        policy = arm_b if arm == "b" else arm_a
        assert invoice.policy == policy.name
        assert [a.at for a in invoice.attempts] == planned(invoice, policy)
        # The same invoice reported again keeps its arm and plan.
        assert fail(dunning, invoice.invoice_id) == invoice
    assert arms["a"] > 10 and arms["b"] > 10  # both arms in use (binomial(60, ½))
    by_policy = Counter(i.policy for i in invoices)
    assert by_policy == {"business-days": arms["a"], "evening-two-tries": arms["b"]}


def test_the_split_follows_the_share(dunning: Dunning) -> None:
    dunning.configure(
        TENANT,
        experiment_name="evening",
        experiment_policy_toml=EVENING,
        experiment_share=0.2,
    )
    invoices = [fail(dunning, f"inv_{n}") for n in range(100)]
    in_b = sum(i.policy == "evening-two-tries" for i in invoices)
    expected = sum(assign_arm(TENANT, f"inv_{n}", "evening", 0.2) == "b" for n in range(100))
    assert in_b == expected and 5 <= in_b <= 40


def test_a_later_transition_follows_the_invoices_own_arm(dunning: Dunning) -> None:
    dunning.configure(
        TENANT,
        experiment_name="evening",
        experiment_policy_toml=EVENING,
        experiment_share=0.5,
    )
    ids = [f"inv_{n}" for n in range(40)]
    in_a = next(i for i in ids if assign_arm(TENANT, i, "evening", 0.5) == "a")
    in_b = next(i for i in ids if assign_arm(TENANT, i, "evening", 0.5) == "b")
    for invoice_id, gaps in ((in_a, 4), (in_b, 2)):
        fail(dunning, invoice_id)
        # A card update re-plans: a prompt attempt, then what the arm's gaps leave.
        updated = dunning.payment_method_updated(TENANT, invoice_id)
        live = [a for a in updated.attempts if a.state is AttemptState.SCHEDULED]
        assert len(live) == gaps, (invoice_id, live)


def test_experiment_settings_are_kept_when_left_out_and_cleared_together(
    dunning: Dunning,
) -> None:
    dunning.configure(
        TENANT,
        experiment_name="evening",
        experiment_policy_toml=EVENING,
        experiment_share=0.5,
    )
    dunning.configure(TENANT, experiment_share=0.25, event_url="http://127.0.0.1:9/events")
    kept = dunning.settings(TENANT)
    assert (kept.experiment_name, kept.experiment_policy_toml, kept.experiment_share) == (
        "evening",
        EVENING,
        0.25,
    )
    assert kept.charge_url == "http://127.0.0.1:9/charge"
    assert dunning.store.get_settings(TENANT) == kept
    dunning.configure(
        TENANT, experiment_name=None, experiment_policy_toml=None, experiment_share=None
    )
    cleared = dunning.settings(TENANT)
    assert not cleared.has_experiment and cleared.event_url == "http://127.0.0.1:9/events"
    # Without an experiment every invoice follows the tenant's policy.
    assert {fail(dunning, f"inv_{n}").policy for n in range(20)} == {"business-days"}


@pytest.mark.parametrize(
    ("field", "settings"),
    [
        # Arm b named like arm a (the preset's name; then a TOML policy's default name).
        (
            "experiment_policy.name",
            {"experiment_policy_toml": EVENING.replace("evening-two-tries", "business-days")},
        ),
        (
            "experiment_policy.name",
            {"policy_toml": EVENING, "experiment_policy_toml": EVENING},
        ),
        (
            "experiment_policy.name",  # neither names itself: arm a is "tenant", arm b not
            {
                "policy_toml": EVENING.replace('name = "evening-two-tries"', ""),
                "experiment_policy_toml": EVENING.replace("evening-two-tries", "tenant"),
            },
        ),
        ("experiment_policy.gaps", {"experiment_policy_toml": "gaps = 3\n"}),
        ("experiment_share", {"experiment_policy_toml": EVENING, "experiment_share": 1.5}),
        ("experiment_share", {"experiment_policy_toml": EVENING, "experiment_share": None}),
    ],
)
def test_a_bad_experiment_is_refused_naming_the_field_and_nothing_is_stored(
    dunning: Dunning, field: str, settings: dict[str, Any]
) -> None:
    before = dunning.settings(TENANT)
    given: dict[str, Any] = {"experiment_name": "evening", "experiment_share": 0.5, **settings}
    with pytest.raises(InvalidInput) as caught:
        dunning.configure(TENANT, **given)
    assert caught.value.field == field
    assert dunning.settings(TENANT) == before


def test_a_share_alone_without_an_experiment_names_what_is_missing(dunning: Dunning) -> None:
    with pytest.raises(InvalidInput) as caught:
        dunning.configure(TENANT, experiment_share=0.5, experiment_name=KEEP)
    assert caught.value.field == "experiment_name"
    assert not isinstance(caught.value, ConfigError)


def test_an_invoice_of_an_arm_that_ended_goes_on_with_the_tenants_policy(
    dunning: Dunning,
) -> None:
    dunning.configure(
        TENANT,
        experiment_name="evening",
        experiment_policy_toml=EVENING,
        experiment_share=0.5,
    )
    ids = [f"inv_{n}" for n in range(40)]
    in_b = next(i for i in ids if assign_arm(TENANT, i, "evening", 0.5) == "b")
    fail(dunning, in_b)
    dunning.configure(
        TENANT, experiment_name=None, experiment_policy_toml=None, experiment_share=None
    )
    updated = dunning.payment_method_updated(TENANT, in_b)
    assert updated.policy == "evening-two-tries"  # what it was planned with, as recorded
    live = [a for a in updated.attempts if a.state is AttemptState.SCHEDULED]
    assert len(live) == 4 and START + timedelta(days=1) > live[0].at  # arm a's re-plan
