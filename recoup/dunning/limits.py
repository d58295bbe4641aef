"""Card-network reattempt limits, counted per card across invoices.

- **Visa** (decline categories 2–4): at most N reattempts per card in any 30 days
  (`NetworkLimits.visa_max_reattempts_30d`, 15 by default). Only reattempts count; a first
  charge does not.
- **Mastercard**: at most 35 attempts per card, merchant and amount in any 30 days, and at most
  10 per card in any 24 hours. Every attempt counts, first charges included.

Windows are rolling: a candidate is refused when *any* window that contains it would go over
the limit, so attempts already planned later (for another invoice on the same card) count too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from recoup.dunning.policy import NetworkLimits

THIRTY_DAYS = timedelta(days=30)
ONE_DAY = timedelta(days=1)


@dataclass(frozen=True, kw_only=True)
class CardAttempt:
    """A charge attempt on a card, made or planned, for any invoice.

    `reattempt` is False for the first charge of an invoice (Visa counts only reattempts);
    `amount` is in minor units.
    """

    card: str
    at: datetime
    invoice: str = ""
    merchant_id: str | None = None
    amount: int | None = None
    reattempt: bool = True


def _over(times: Sequence[datetime], candidate: datetime, window: timedelta, limit: int) -> bool:
    """True when adding `candidate` puts more than `limit` instants in some window of length
    `window` (half-open, [start, start + window)) that contains it."""
    ordered = sorted([*times, candidate])
    for start in ordered:
        if start > candidate:
            break
        if candidate - start >= window:
            continue
        inside = sum(1 for t in ordered if start <= t < start + window)
        if inside > limit:
            return True
    return False


def limit_reason(
    *,
    network: str | None,
    visa_category: int | None,
    visa_limited: frozenset[int],
    limits: NetworkLimits,
    card: str | None,
    merchant_id: str | None,
    amount: int | None,
    candidate: datetime,
    history: Iterable[CardAttempt],
) -> str | None:
    """Why a reattempt at `candidate` on `card` would break a network limit, or None if it
    would not. `history` holds every other attempt on the card, this plan's earlier ones
    included."""
    if not card or not network:
        return None
    same_card = [h for h in history if h.card == card]
    match network.lower():
        case "visa":
            if visa_category is None or visa_category not in visa_limited:
                return None
            times = [h.at for h in same_card if h.reattempt]
            if _over(times, candidate, THIRTY_DAYS, limits.visa_max_reattempts_30d):
                return (
                    f"Visa limit: {limits.visa_max_reattempts_30d} reattempts per card in 30 days"
                )
        case "mastercard":
            daily = [h.at for h in same_card]
            if _over(daily, candidate, ONE_DAY, limits.mastercard_max_per_card_per_day):
                return (
                    f"Mastercard limit: {limits.mastercard_max_per_card_per_day} attempts "
                    "per card per day"
                )
            same_charge = [
                h.at for h in same_card if h.merchant_id == merchant_id and h.amount == amount
            ]
            if _over(
                same_charge, candidate, THIRTY_DAYS, limits.mastercard_max_per_merchant_amount_30d
            ):
                return (
                    f"Mastercard limit: {limits.mastercard_max_per_merchant_amount_30d} attempts "
                    "per card, merchant and amount in 30 days"
                )
        case _:
            return None
    return None


__all__ = ["CardAttempt", "limit_reason"]
