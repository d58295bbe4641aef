"""Card-network limits over rolling windows, per card across invoices."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from recoup.dunning import CardAttempt, NetworkLimits
from recoup.dunning.limits import limit_reason

T0 = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
LIMITS = NetworkLimits()


def check(network: str, history: list[CardAttempt], at: datetime, **extra: object) -> str | None:
    options: dict[str, object] = {
        "visa_category": 2,
        "merchant_id": "acct_1",
        "amount": 1500,
        **extra,
    }
    return limit_reason(
        network=network,
        visa_limited=frozenset({2, 3, 4}),
        limits=LIMITS,
        card="card_1",
        candidate=at,
        history=history,
        **options,  # type: ignore[arg-type]
    )


def visa_history(days: list[int]) -> list[CardAttempt]:
    return [CardAttempt(card="card_1", at=T0 + timedelta(days=d)) for d in days]


def test_visa_allows_fifteen_reattempts_in_thirty_days() -> None:
    assert check("visa", visa_history(list(range(14))), T0 + timedelta(days=20)) is None
    assert check("visa", visa_history(list(range(15))), T0 + timedelta(days=20)) is not None


def test_an_attempt_leaves_the_visa_window_after_thirty_days() -> None:
    assert check("visa", visa_history([0] * 15), T0 + timedelta(days=30)) is None


def test_later_planned_attempts_count_too() -> None:
    # The window [day 1, day 31) holds the candidate and the 15 planned after it.
    assert check("visa", visa_history([5] * 15), T0 + timedelta(days=1)) is not None


def test_first_charges_and_other_cards_do_not_count_for_visa() -> None:
    firsts = [CardAttempt(card="card_1", at=T0, reattempt=False) for _ in range(20)]
    others = [CardAttempt(card="card_2", at=T0) for _ in range(20)]
    assert check("visa", firsts + others, T0 + timedelta(days=1)) is None


def test_visa_category_1_and_unknown_networks_are_not_counted_here() -> None:
    # Category 1 is never retried at all (the taxonomy says so before limits are asked).
    assert check("visa", visa_history([0] * 20), T0, visa_category=1) is None
    assert check("amex", visa_history([0] * 20), T0) is None


def test_mastercard_counts_per_card_merchant_and_amount() -> None:
    same = [
        CardAttempt(
            card="card_1", at=T0 + timedelta(days=d % 25), merchant_id="acct_1", amount=1500
        )
        for d in range(35)
    ]
    reason = check("mastercard", same, T0 + timedelta(days=26))
    assert reason is not None
    assert "merchant and amount" in reason
    assert check("mastercard", same, T0 + timedelta(days=26), amount=1600) is None
