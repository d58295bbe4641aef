"""Reading Stripe's objects: the timezone a customer's metadata names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recoup.payments.stripe_reading import metadata_timezone


def test_the_first_holder_naming_a_real_zone_wins_and_a_bad_name_is_noted() -> None:
    notes: list[str] = []
    holders: tuple[tuple[str, Mapping[str, Any]], ...] = (
        ("invoice", {"metadata": {"timezone": "Mars/Olympus"}}),
        ("subscription", {}),
        ("customer", {"metadata": {"timezone": "Europe/Paris"}}),
        ("other", {"metadata": {"timezone": "Asia/Tokyo"}}),
    )
    assert metadata_timezone(holders, notes) == ("Europe/Paris", "customer")
    assert notes == ["the invoice's metadata timezone 'Mars/Olympus' is no IANA zone"]


def test_no_zone_named_anywhere_is_none() -> None:
    notes: list[str] = []
    assert metadata_timezone((("invoice", {"metadata": None}), ("customer", {})), notes) is None
    assert notes == []
