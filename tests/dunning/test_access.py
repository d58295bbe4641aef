"""The access state (`dunning.access`): the table of one invoice, the worst of a customer's
invoices, and the one change that comes with time alone; properties over random invoices and
instants hold the three together (access always follows the invoices' states)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.dunning.access import (
    Access,
    Standing,
    customer_access,
    invoice_access,
    next_change,
)
from recoup.dunning.invoice import InvoiceState
from recoup.dunning.policy import parse_policy as policy_from_text
from recoup.errors import ConfigError

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
WEEK = timedelta(days=7)
OPEN = (InvoiceState.RETRYING, InvoiceState.AWAITING_CUSTOMER)
ACTIONS = ("pause_access", "cancel", "mark_uncollectible", "leave_past_due")


def standing(
    state: InvoiceState = InvoiceState.RETRYING,
    *,
    final_action: str = "pause_access",
    failed_at: datetime = T0,
    grace: timedelta = WEEK,
    invoice_id: str = "in_1",
) -> Standing:
    return Standing(
        invoice_id=invoice_id,
        state=state,
        final_action=final_action,
        failed_at=failed_at,
        grace=grace,
    )


@pytest.mark.parametrize(
    ("state", "final_action", "after", "access"),
    [
        # Retries run: grace for the grace period, restricted from its end.
        (InvoiceState.RETRYING, "pause_access", timedelta(0), Access.GRACE),
        (InvoiceState.RETRYING, "pause_access", WEEK - timedelta(seconds=1), Access.GRACE),
        (InvoiceState.RETRYING, "pause_access", WEEK, Access.RESTRICTED),
        (InvoiceState.AWAITING_CUSTOMER, "cancel", timedelta(days=1), Access.GRACE),
        (InvoiceState.AWAITING_CUSTOMER, "cancel", timedelta(days=8), Access.RESTRICTED),
        # Exhausted: the final action decides.
        (InvoiceState.EXHAUSTED, "pause_access", timedelta(days=1), Access.PAUSED),
        (InvoiceState.EXHAUSTED, "cancel", timedelta(days=20), Access.PAUSED),
        (InvoiceState.EXHAUSTED, "mark_uncollectible", timedelta(days=1), Access.RESTRICTED),
        (InvoiceState.EXHAUSTED, "leave_past_due", timedelta(days=30), Access.RESTRICTED),
        # Paid, or stopped without a payment: nothing held back.
        (InvoiceState.RECOVERED, "pause_access", timedelta(days=1), Access.ACTIVE),
        (InvoiceState.CANCELLED, "pause_access", timedelta(days=1), Access.ACTIVE),
    ],
)
def test_one_invoice_gives_the_access_of_its_row(
    state: InvoiceState, final_action: str, after: timedelta, access: Access
) -> None:
    assert invoice_access(standing(state, final_action=final_action), now=T0 + after) is access


def test_a_customer_without_invoices_in_dunning_is_active() -> None:
    assert customer_access([], now=T0) is Access.ACTIVE
    assert next_change([], now=T0) is None


def test_the_worst_invoice_wins() -> None:
    paused = standing(InvoiceState.EXHAUSTED, invoice_id="in_old")
    retrying = standing(InvoiceState.RETRYING, invoice_id="in_new")
    assert customer_access([retrying, paused], now=T0) is Access.PAUSED
    recovered = standing(InvoiceState.RECOVERED, invoice_id="in_old")
    assert customer_access([retrying, recovered], now=T0) is Access.GRACE


def test_the_next_change_is_the_first_grace_that_ends_while_its_invoice_is_open() -> None:
    early = standing(failed_at=T0 - timedelta(days=2), invoice_id="in_early")
    late = standing(failed_at=T0, invoice_id="in_late")
    done = standing(InvoiceState.EXHAUSTED, failed_at=T0 - timedelta(days=6), invoice_id="x")
    assert next_change([late, early, done], now=T0) == (T0 + timedelta(days=5), "in_early")
    # At the instant itself the change has happened: the next one is the other invoice's.
    assert next_change([late, early], now=T0 + timedelta(days=5)) == (T0 + WEEK, "in_late")
    assert next_change([late, early], now=T0 + WEEK) is None


def test_a_grace_of_zero_days_restricts_from_the_failure() -> None:
    assert invoice_access(standing(grace=timedelta(0)), now=T0) is Access.RESTRICTED
    assert next_change([standing(grace=timedelta(0))], now=T0) is None


# The policy's [access] table


def test_the_access_table_is_read_with_its_default_and_its_errors_name_the_field() -> None:
    base = 'name = "p"\ngaps = [{ days = 1 }]\n'
    assert policy_from_text(base).access.grace_days == 7
    assert policy_from_text(base + "[access]\ngrace_days = 0\n").access.grace == timedelta(0)
    for bad, field in (
        ("[access]\ngrace_days = -1\n", "access.grace_days"),
        ('[access]\ngrace_days = "7"\n', "access.grace_days"),
        ("[access]\ngrace_days = 400\n", "access.grace_days"),
        ("[access]\ngrace = 7\n", "access.grace"),
        ("access = 7\n", "access"),
    ):
        with pytest.raises(ConfigError) as raised:
            policy_from_text(base + bad)
        assert raised.value.field == field


# Properties: access always follows the invoices' states

standings = st.builds(
    standing,
    st.sampled_from(list(InvoiceState)),
    final_action=st.sampled_from(ACTIONS),
    failed_at=st.datetimes(
        min_value=datetime(2026, 1, 1), max_value=datetime(2026, 12, 31), timezones=st.just(UTC)
    ),
    grace=st.integers(0, 60).map(lambda d: timedelta(days=d)),
    invoice_id=st.text("abc", min_size=1, max_size=3),
)
instants = st.datetimes(
    min_value=datetime(2025, 12, 1), max_value=datetime(2027, 3, 1), timezones=st.just(UTC)
)


@given(st.lists(standings, max_size=6, unique_by=lambda s: s.invoice_id), instants)
def test_a_customers_access_is_what_their_invoices_states_give(
    invoices: list[Standing], now: datetime
) -> None:
    access = customer_access(invoices, now=now)
    states = {s.state for s in invoices}
    # Paused exactly when an exhausted invoice's final action ended access.
    pausing = any(
        s.state is InvoiceState.EXHAUSTED and s.final_action in ("pause_access", "cancel")
        for s in invoices
    )
    assert (access is Access.PAUSED) == pausing
    # Active exactly when nothing is open or exhausted (paid and stopped ones hold nothing).
    holding = states & {*OPEN, InvoiceState.EXHAUSTED}
    assert (access is Access.ACTIVE) == (not holding)
    # Grace only while an invoice is open within its grace period, and none is worse.
    if access is Access.GRACE:
        assert InvoiceState.EXHAUSTED not in states
        assert any(s.state in OPEN and now < s.failed_at + s.grace for s in invoices)
    # Never better than any one invoice.
    assert all(access.rank >= invoice_access(s, now=now).rank for s in invoices)


# A customer's invoices have distinct ids (the store's key): two standings of one id would be
# one invoice in two states at once.
@given(st.lists(standings, max_size=6, unique_by=lambda s: s.invoice_id), instants, instants)
def test_with_no_message_access_only_gets_worse_and_only_at_the_next_change(
    invoices: list[Standing], a: datetime, b: datetime
) -> None:
    early, late = min(a, b), max(a, b)
    before, after = customer_access(invoices, now=early), customer_access(invoices, now=late)
    assert after.rank >= before.rank
    change = next_change(invoices, now=early)
    if change is None or late < change[0]:
        assert after is before  # nothing happens between changes
    else:
        # The change is an open invoice's grace ending: restricted from that instant.
        at, invoice_id = change
        ending = [s for s in invoices if s.invoice_id == invoice_id and s.grace_ends == at]
        assert ending and all(s.state in OPEN for s in ending)
        assert invoice_access(ending[0], now=at) is Access.RESTRICTED
        assert invoice_access(ending[0], now=at - timedelta(microseconds=1)) is Access.GRACE
