"""`ChargeFailure`: a failure is checked and written in its one form as it is made, and the
report the runtime takes is that value itself (no copy on the way to the opening)."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.dunning.failure import ChargeFailure
from recoup.errors import InvalidInput
from recoup.recovery.records import FailureReport

FAILED_AT = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)
BASE = {
    "invoice_id": "inv_1",
    "customer_id": "cus_1",
    "amount": 1999,
    "currency": "usd",
    "failed_at": FAILED_AT,
    "timezone": "America/Chicago",
}


def test_codes_are_written_in_their_one_form() -> None:
    failure = ChargeFailure(**{**BASE, "currency": "EUR", "country": "de", "card_network": "VISA"})
    assert (failure.currency, failure.country, failure.card_network) == ("eur", "DE", "visa")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("invoice_id", "inv 1"),  # outside the id alphabet
        ("customer_id", ""),
        ("customer_id", "c" * 101),
        ("currency", "us"),
        ("currency", "u$d"),
        ("failed_at", datetime(2026, 6, 23, 15, 0)),  # naive
        ("timezone", "Mars/Olympus"),
    ],
)
def test_a_bad_field_is_refused_by_name(field: str, value: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        ChargeFailure(**{**BASE, field: value})
    assert caught.value.field == field


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_only_positive_minor_units_are_an_amount(amount: int) -> None:
    if amount > 0:
        assert ChargeFailure(**{**BASE, "amount": amount}).amount == amount
    else:
        with pytest.raises(InvalidInput):
            ChargeFailure(**{**BASE, "amount": amount})


def test_a_report_is_the_failure_plus_where_to_charge_and_who_to_write_to() -> None:
    report = FailureReport(**BASE, customer_email="Ada@EXAMPLE.com", locale="de-DE")
    assert isinstance(report, ChargeFailure)
    added = {f.name for f in fields(FailureReport)} - {f.name for f in fields(ChargeFailure)}
    assert added == {"charge_url", "customer_email", "customer_name", "locale"}
    # Both checks ran: the failure's and the contact's.
    assert (report.customer_email, report.locale) == ("Ada@example.com", "de_DE")
    with pytest.raises(InvalidInput):
        FailureReport(**{**BASE, "currency": "usdx"})


def test_the_planner_sees_the_same_failure() -> None:
    failure = ChargeFailure(**BASE, advice_code="try_again_later", card_fingerprint="fp_1")
    planned = failure.for_planner()
    assert (planned.invoice, planned.failed_at, planned.timezone) == (
        "inv_1",
        FAILED_AT,
        BASE["timezone"],
    )
    assert (planned.advice_codes, planned.card, planned.amount) == (
        ("try_again_later",),
        "fp_1",
        1999,
    )
    assert ChargeFailure(**BASE).for_planner().advice_codes == ()
