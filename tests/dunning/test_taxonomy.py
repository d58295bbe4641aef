"""The decline taxonomy: shipped data, lookup rules and advice overrides."""

from __future__ import annotations

import pytest

from recoup.dunning import DeclineClass, classify, default_taxonomy
from recoup.dunning.taxonomy import parse_taxonomy
from recoup.errors import ConfigError

NEVER, ACTION, SOFT, NA = (
    DeclineClass.NEVER,
    DeclineClass.CUSTOMER_ACTION,
    DeclineClass.SOFT,
    DeclineClass.NOT_APPLICABLE,
)


def test_the_shipped_table_records_its_sources_and_visa_list_version() -> None:
    table = default_taxonomy()
    assert table.version
    assert "category" in table.visa_category_list
    assert any("stripe.com" in s for s in table.sources)
    assert table.visa_limited_categories == frozenset({2, 3, 4})


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("lost_card", NEVER),  # Stripe non-retryable list
        ("stolen_card", NEVER),
        ("transaction_not_allowed", NEVER),  # the 9th non-retryable code
        ("authentication_required", ACTION),  # 3DS on-session
        ("expired_card", ACTION),
        ("insufficient_funds", SOFT),
        ("do_not_honor", SOFT),
        ("incorrect_pin", NA),  # card-present only
        ("INSUFFICIENT_FUNDS", SOFT),  # case does not matter for Stripe codes
        ("51", SOFT),  # ISO 8583, Visa category 2
        ("41", NEVER),  # ISO 8583 lost card, Visa category 1
        ("n7", ACTION),  # ISO 8583 CVV2 failure
        ("1A", ACTION),  # ISO 8583 authentication required
        ("visa:1", NEVER),
        ("visa:3", ACTION),
    ],
)
def test_decline_codes_map_to_their_class(code: str, expected: DeclineClass) -> None:
    assert classify(code).decline_class is expected


def test_visa_categories_come_from_the_equivalent_iso_code() -> None:
    assert classify("insufficient_funds").visa_category == 2
    assert classify("do_not_honor").visa_category == 4
    assert classify("something_new").visa_category == 4  # "every other code"


def test_an_unknown_code_is_soft_capped_and_named() -> None:
    verdict = classify("zorp")
    assert verdict.decline_class is SOFT
    assert verdict.max_attempts == 2
    assert verdict.unknown == ("zorp",)
    assert "unknown decline code 'zorp'" in verdict.reason


@pytest.mark.parametrize(
    ("advice", "expected", "delay"),
    [
        ("do_not_try_again", NEVER, 0),
        ("03", NEVER, 0),  # MAC 03
        ("21", NEVER, 0),  # MAC 21: the cardholder stopped recurring payments
        ("01", ACTION, 0),  # MAC 01: new account information
        ("confirm_card_data", ACTION, 0),
        ("24", SOFT, 1),
        ("25", SOFT, 24),
        ("26", SOFT, 48),
        ("30", SOFT, 240),
        ("40", SOFT, 0),  # informational: overrides nothing
    ],
)
def test_advice_codes_override_a_soft_decline(
    advice: str, expected: DeclineClass, delay: int
) -> None:
    verdict = classify("insufficient_funds", (advice,))
    assert verdict.decline_class is expected
    assert verdict.min_delay_hours == delay


def test_a_milder_advice_never_lifts_a_hard_decline() -> None:
    assert classify("lost_card", ("try_again_later",)).decline_class is NEVER
    assert classify("expired_card", ("25",)).decline_class is ACTION


def test_the_strictest_of_several_advice_codes_wins_and_the_longest_delay_applies() -> None:
    verdict = classify("insufficient_funds", ("26", "01", "24"))
    assert verdict.decline_class is ACTION
    assert verdict.min_delay_hours == 48


def test_an_unknown_advice_code_is_reported_and_ignored() -> None:
    verdict = classify("insufficient_funds", ("99",))
    assert verdict.decline_class is SOFT
    assert verdict.unknown == ("99",)
    assert "unknown advice '99' ignored" in verdict.reason


def test_a_bad_class_in_a_taxonomy_file_names_its_entry() -> None:
    with pytest.raises(ConfigError, match=r"stripe_decline\.odd\.class"):
        parse_taxonomy('[stripe_decline]\nodd = { class = "maybe" }\n')
