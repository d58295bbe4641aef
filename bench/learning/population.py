"""The failed invoices of one seed: the demo's customers (`recoup.demo.population`: zones,
countries, networks, decline and advice codes, renewal instants), drawn again for each month
of the horizon and shifted by whole weeks, so weekdays stay what they were drawn as.

Only what a policy may know is here (the failure, as the planner takes it); what the world
does with each try is the simulation's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from recoup.demo.population import MONTH_START, generate
from recoup.dunning import Failure
from recoup.payments.world import Segment

WEEKS_PER_MONTH = 4  # the months are shifted by 28 days, keeping each renewal's weekday


@dataclass(frozen=True, kw_only=True)
class FailureContext:
    """One failed invoice as a policy sees it: the planner's `failure`, the customer (for a
    sticky holdout) and the world's segment (decline code, network, country)."""

    invoice: str
    customer: str
    failure: Failure
    segment: Segment

    @property
    def failed_at(self) -> datetime:
        return self.failure.failed_at


def population(seed: int, *, size: int, months: int) -> list[FailureContext]:
    """`size` failures per month for `months` months, ordered by the failure's instant; the
    same for the same seed."""
    found: list[FailureContext] = []
    for month in range(months):
        shift = timedelta(weeks=WEEKS_PER_MONTH * month)
        for c in generate(seed * 1_009 + month, size):
            invoice = f"m{month}-{c.invoice_id}"
            advice = (c.advice_code,) if c.advice_code else ()
            failure = Failure(
                invoice=invoice,
                failed_at=c.failed_at + shift,
                timezone=c.timezone,
                country=c.country,
                decline_code=c.decline_code,
                advice_codes=advice,
                card=f"m{month}-{c.card}",
                network=c.network,
                gateway=c.gateway,
                merchant_id=c.merchant_id,
                amount=c.amount,
            )
            segment = Segment(
                decline_code=c.decline_code,
                network=c.network,
                country=c.country,
                advice_codes=advice,
            )
            found.append(
                FailureContext(
                    invoice=invoice,
                    customer=f"m{month}-{c.customer_id}",
                    failure=failure,
                    segment=segment,
                )
            )
    return sorted(found, key=lambda f: (f.failed_at, f.invoice))


HORIZON_START = MONTH_START  # the first month's renewals fail from here (local dates)

__all__ = ["HORIZON_START", "FailureContext", "population"]
