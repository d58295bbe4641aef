"""A policy's `[flow]` (`recoup.dunning.policy_flow`): parsed and refused naming the field,
and the runtime's attempt jobs carry its key per gateway or merchant id, so the jobs' flow
control limits what a gateway or a merchant account receives."""

from __future__ import annotations

from datetime import timedelta

import pytest

from recoup.dunning import parse_policy
from recoup.dunning.lifecycle import Opening, open_invoice
from recoup.dunning.planner import plan_retries
from recoup.dunning.policy_flow import FlowLimit, parse_flow
from recoup.errors import ConfigError
from tests.recovery.conftest import START, Runtime
from tests.support import charge_failure

GAPS = "gaps = [{ days = 1 }, { days = 3 }]\n"


def test_a_policy_reads_a_flow_table() -> None:
    policy = parse_policy(GAPS + '[flow]\nby = "merchant"\nrate = 10\nparallelism = 3\n')
    assert policy.flow == FlowLimit(by="merchant", rate=10, period_seconds=1.0, parallelism=3)
    assert parse_policy(GAPS).flow is None


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"by": "card", "rate": 1}, "flow.by"),
        ({"by": "gateway"}, "flow"),
        ({"by": "gateway", "rate": 0}, "flow.rate"),
        ({"by": "gateway", "rate": 1, "period_seconds": 0}, "flow.period_seconds"),
        ({"by": "gateway", "parallelism": True}, "flow.parallelism"),
        ({"by": "gateway", "rate": 1, "burst": 2}, "flow.burst"),
        ("fast", "flow"),
        # One key per attempt job: a gateway's limit and a merchant's at once are refused.
        ({"by": ["gateway", "merchant"], "rate": 1}, "flow.by"),
    ],
)
def test_bad_flow_tables_are_refused_naming_the_field(value: object, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_flow(value)
    assert caught.value.field == field


def test_a_flow_key_names_the_scope_and_shares_one_for_the_missing_attribute() -> None:
    assert FlowLimit(by="gateway", rate=1).key_for("stripe", "m1") == "dunning:gateway:stripe"
    assert FlowLimit(by="merchant", rate=1).key_for("stripe", None) == "dunning:merchant:-"
    both = FlowLimit(by="gateway+merchant", rate=1).key_for("adyen", "m2")
    assert both == "dunning:gateway:adyen|merchant:m2"


def test_the_runtimes_attempt_jobs_carry_the_policys_flow_key(runtime: Runtime) -> None:
    runtime.dunning.configure(
        "default",
        policy_toml=GAPS + '[flow]\nby = "merchant"\nrate = 2\nperiod_seconds = 60\n',
    )
    invoice = runtime.fail("inv_f", "fp_f", merchant_id="acct_9", gateway="stripe")
    job = runtime.store.get("default", invoice.attempts[0].job_id)
    assert job is not None
    assert (job.flow_key, job.flow_rate, job.flow_period) == (
        "dunning:merchant:acct_9",
        2,
        timedelta(seconds=60),
    )


def test_attempt_jobs_resync_recreates_keep_the_policys_flow_key(runtime: Runtime) -> None:
    # As if the process died between storing the invoice and writing its attempt jobs: resync
    # makes them, and they are limited per gateway as the first ones would have been.
    runtime.dunning.configure(
        "default",
        policy_toml=GAPS + '[flow]\nby = "gateway"\nrate = 3\nparallelism = 2\n',
    )
    policy = runtime.dunning.policy("default")
    opening = Opening(
        tenant="default",
        failure=charge_failure(
            failed_at=START,
            invoice_id="inv_r",
            customer_id="cus_r",
            timezone="Europe/Paris",
            country="FR",
            card_fingerprint="fp_r",
            gateway="adyen",
            merchant_id="acct_1",
        ),
        charge_url=runtime.charge_url,
        policy=policy,
    )
    invoice, first = open_invoice(
        opening, plan_retries(opening.failure.for_planner(), policy), now=START
    )
    runtime.store.create_invoice(invoice, first.events)
    assert invoice.attempts
    assert all(runtime.store.get("default", a.job_id) is None for a in invoice.attempts)
    runtime.dunning.resync()
    for attempt in invoice.attempts:
        job = runtime.store.get("default", attempt.job_id)
        assert job is not None
        assert (job.flow_key, job.flow_rate, job.flow_parallelism) == (
            "dunning:gateway:adyen",
            3,
            2,
        )
