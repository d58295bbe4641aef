"""The demo's simulated customers: a month of failed renewals drawn from `mixes`, the same for
the same seed, and what each card does at the gateway afterwards.

Pure: a seeded `random.Random`, no clock. The billing app's process and the demo's own build
the same customers from the seed, so the gateway's card scenarios and faults (there) agree
with the renewals, card updates and payments the demo sends (here).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from recoup.demo import mixes
from recoup.payments import Combine, Fault, FaultKind, Scenario
from recoup.timekeeping.zones import resolve_local

MONTH_START = datetime(2026, 10, 1, tzinfo=UTC)  # the renewals fail in October 2026, local
MONTH_DAYS = 31
# The test clock starts a day early: October 1st in Auckland (UTC+13) begins on September 30.
CLOCK_START = MONTH_START - timedelta(days=1)
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Customer:
    """One subscription whose renewal failed, and what its card does next."""

    invoice_id: str
    customer_id: str
    amount: int  # minor units
    currency: str
    timezone: str
    country: str
    failed_at: datetime  # the renewal's charge, declined
    decline_code: str
    advice_code: str | None
    card: str  # the card's fingerprint at the gateway
    network: str
    gateway: str
    merchant_id: str
    outlook: str  # clears | payday | never | update | hard (see `mixes.DECLINES`)
    clears_after: timedelta | None  # outlook "clears": from the failure
    card_updated_at: datetime | None  # a new card is supplied (outlook "update")
    paid_out_of_band_at: datetime | None  # the customer pays another way
    fault: str | None  # a `FaultKind` injected on the first retry's charge
    fault_delay: float = 0.0  # seconds, for a slow answer
    world_odds: bool = False  # soft declines also recover with the gateway world's odds

    def scenario(self) -> Scenario:
        """What the gateway answers for this card until it clears."""
        scenario = self._rules()
        if self.world_odds and self.outlook in ("clears", "payday", "never"):
            # The rules stand, and every retry also has the world's chance at its local time.
            return dataclasses.replace(
                scenario,
                world_odds=True,
                timezone=self.timezone,
                network=self.network,
                country=self.country,
            )
        return scenario

    def _rules(self) -> Scenario:
        code, advice = self.decline_code, self.advice_code
        if self.outlook == "clears":
            return Scenario.soft(code, advice_code=advice, clears_after=self.clears_after)
        if self.outlook == "payday":
            # Declined at the renewal itself, then funds arrive at the next local payday.
            return Scenario.soft(
                code,
                advice_code=advice,
                clears_after=timedelta(hours=12),
                paydays=mixes.PAYDAYS,
                window_days=mixes.PAYDAY_WINDOW_DAYS,
                timezone=self.timezone,
                combine=Combine.ALL,
            )
        if self.outlook == "update":
            return Scenario(decline_code=code, advice_code=advice, clears_on_update=True)
        return Scenario.hard(code, advice_code=advice)  # never / hard: it never clears

    def injected_fault(self) -> Fault | None:
        """The fault the gateway applies to this invoice's first retry, if any."""
        if self.fault is None:
            return None
        return Fault(
            kind=FaultKind(self.fault),
            idempotency_key=first_retry_key(self.invoice_id),
            times=1,
            delay_seconds=self.fault_delay,
            reason=f"demo: {self.fault.replace('_', ' ')}",
        )


def first_retry_key(invoice_id: str) -> str:
    """The provider idempotency key of an invoice's first retry (the receiver's contract)."""
    return f"charge:{invoice_id}:1"


def generate(seed: int, size: int, *, world_odds: bool = False) -> list[Customer]:
    """`size` customers whose renewals failed in the month from `MONTH_START`, ordered by
    the failure's instant; the same for the same seed. With `world_odds` (`recoup demo
    --scenarios`), the same customers, whose soft declines also recover with the odds of the
    gateway's world at each retry's local time (`recoup.payments.world`)."""
    rng = random.Random(seed)
    customers = [_customer(rng, i) for i in range(size)]
    if world_odds:
        customers = [dataclasses.replace(c, world_odds=True) for c in customers]
    return sorted(customers, key=lambda c: (c.failed_at, c.invoice_id))


def _customer(rng: random.Random, i: int) -> Customer:
    tz, country = _pick(rng, [((z, c), w) for z, c, w in mixes.ZONES])
    merchant_id, gateway = mixes.MERCHANT.get(country, ("acct_na", "stripe"))
    network = _pick(rng, mixes.NETWORKS)
    code, outlooks = _pick(rng, [((c, o), w) for c, w, o in mixes.DECLINES])
    outlook = _pick(rng, outlooks)
    failed_at = _renewal_instant(rng, tz)
    advice = _advice(rng, code, network)
    if advice == "do_not_try_again":
        outlook = "hard"
    clears_after = _hours(rng, mixes.CLEARS_AFTER_HOURS) if outlook == "clears" else None
    updated_at = None
    if outlook == "update" and rng.random() < mixes.UPDATED_SHARE.get(code, 0.0):
        updated_at = failed_at + _hours(rng, mixes.UPDATED_AFTER_HOURS)
    paid_at = None
    if rng.random() < mixes.PAID_OUT_OF_BAND_SHARE:
        paid_at = failed_at + _hours(rng, mixes.PAID_AFTER_HOURS)
    fault, delay = None, 0.0
    draw = rng.random()
    for kind, share, seconds in mixes.FAULTS:
        if draw < share:
            fault, delay = kind, seconds
            break
        draw -= share
    return Customer(
        invoice_id=f"inv_{i + 1:05d}",
        customer_id=f"cus_{i + 1:05d}",
        amount=_pick(rng, mixes.PLANS),
        currency=mixes.CURRENCY.get(country, "usd"),
        timezone=tz,
        country=country,
        failed_at=failed_at,
        decline_code=code,
        advice_code=advice,
        card=f"card_{i + 1:05d}",
        network=network,
        gateway=gateway,
        merchant_id=merchant_id,
        outlook=outlook,
        clears_after=clears_after,
        card_updated_at=updated_at,
        paid_out_of_band_at=paid_at,
        fault=fault,
        fault_delay=delay,
    )


def _renewal_instant(rng: random.Random, tz: str) -> datetime:
    """The renewal's charge: on its anchor day of the month, at the local hour of sign-up."""
    days = [(d, mixes.FIRST_OF_MONTH_WEIGHT if d == 1 else 1) for d in range(1, MONTH_DAYS + 1)]
    day = _pick(rng, days)
    hour = _pick(rng, list(zip(range(24), mixes.SIGNUP_HOURS, strict=True)))
    local = datetime(MONTH_START.year, MONTH_START.month, day, hour, rng.randrange(60))
    return resolve_local(local, tz)


def _advice(rng: random.Random, code: str, network: str) -> str | None:
    advice, share = mixes.MASTERCARD_NSF_ADVICE
    if code == "insufficient_funds" and network == "mastercard" and rng.random() < share:
        return advice
    if code in ("do_not_honor", "generic_decline") and rng.random() < mixes.DO_NOT_TRY_AGAIN_SHARE:
        return "do_not_try_again"
    return None


def _hours(rng: random.Random, bounds: tuple[int, int]) -> timedelta:
    # Whole minutes: instants that read well in a timeline.
    return timedelta(minutes=rng.randrange(bounds[0] * 60, bounds[1] * 60))


def _pick(rng: random.Random, weighted: Sequence[tuple[T, int]]) -> T:
    values = [v for v, _ in weighted]
    return rng.choices(values, weights=[w for _, w in weighted])[0]


__all__ = ["CLOCK_START", "MONTH_DAYS", "MONTH_START", "Customer", "first_retry_key", "generate"]
