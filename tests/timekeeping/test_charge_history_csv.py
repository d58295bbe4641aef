"""Reading a charge history CSV: one local date per charge, the first bad cell refused by
line and column."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from recoup.cli._charge_history import Charge, read_charge_history
from recoup.errors import InvalidInput


def test_instants_are_read_in_the_customers_zone_and_dates_as_they_are() -> None:
    charges = read_charge_history(
        "customer_id,charged_at,timezone\n"
        # 03:00Z on Feb 1 is 22:00 on Jan 31 in New York, and 12:00 on Feb 1 in Tokyo.
        "ny,2025-02-01T03:00:00Z,America/New_York\n"
        "tokyo,2025-02-01T03:00:00Z,Asia/Tokyo\n"
        "utc,2025-02-01T03:00:00+00:00,\n"  # an empty zone is UTC
        "local,2025-01-31T23:30,Asia/Tokyo\n"  # a wall time is its own date
        "day,2025-01-31,America/New_York\n"
    )
    assert [(c.customer, c.charged) for c in charges] == [
        ("ny", date(2025, 1, 31)),
        ("tokyo", date(2025, 2, 1)),
        ("utc", date(2025, 2, 1)),
        ("local", date(2025, 1, 31)),
        ("day", date(2025, 1, 31)),
    ]


def test_columns_come_in_any_order_and_others_are_ignored() -> None:
    charges = read_charge_history(
        "amount,plan,charged_at,customer_id\n"
        "19.90,gold,2025-01-31, cus_1 \n"
        ",gold,2025-02-28,cus_1\n"
    )
    assert charges == [
        Charge(customer="cus_1", charged=date(2025, 1, 31), line=2, amount=Decimal("19.90")),
        Charge(customer="cus_1", charged=date(2025, 2, 28), line=3, amount=None),
    ]


def test_quotes_a_byte_order_mark_crlf_and_blank_lines_are_read_as_csv() -> None:
    charges = read_charge_history(
        '\ufeffcustomer_id,charged_at\r\n\r\n"Smith, J.",2025-01-31\r\n"multi\nline",2025-02-28\r\n'
    )
    # Line numbers count the file's lines: the blank line 2 is skipped, not renumbered.
    assert [(c.customer, c.line) for c in charges] == [("Smith, J.", 3), ("multi\nline", 4)]


def test_a_header_alone_is_an_empty_history() -> None:
    assert read_charge_history("customer_id,charged_at\n") == []


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("customer_id,charged_at\nc1,2025-13-01\n", "H.csv line 2: charged_at", "2025-13-01"),
        ("customer_id,charged_at\nc1,9001-01-01\n", "H.csv line 2: charged_at", "9001-01-01"),
        # An instant whose UTC year is out of range.
        (
            "customer_id,charged_at\nc1,1970-01-01T00:30:00+01:00\n",
            "H.csv line 2: charged_at",
            "1970-01-01T00:30:00+01:00",
        ),
        ("customer_id,charged_at,amount\nc1,2025-01-31,NaN\n", "H.csv line 2: amount", "NaN"),
        (
            "customer_id,charged_at,amount\nc1,2025-01-31,Infinity\n",
            "H.csv line 2: amount",
            "Infinity",
        ),
        (
            "customer_id,charged_at,timezone\nc1,2025-01-31,Europe/Atlantis\n",
            "H.csv line 2: timezone",
            "Europe/Atlantis",
        ),
        ("customer_id,charged_at\n  ,2025-01-31\n", "H.csv line 2: customer_id", ""),
        ("customer_id,charged_at\nc1\n", "H.csv line 2", "c1"),
        ("charged_at\n2025-01-31\n", "H.csv header", "charged_at"),
        (
            'customer_id,charged_at\nc1,"' + "x" * 200_000 + '"\n',
            "H.csv line 2",
            "field larger than field limit (131072)",
        ),
    ],
)
def test_the_first_bad_cell_is_refused_naming_line_and_column(
    text: str, field: str, value: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        read_charge_history(text, source="H.csv")
    assert (caught.value.field, caught.value.value) == (field, value)
