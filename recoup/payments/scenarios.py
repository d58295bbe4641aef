"""Card scenarios: what the simulated gateway answers for one card at one instant.

A `Scenario` is a decline code (and optional advice code) that the card returns until it
*clears*. The clearing conditions are pure functions of the charge's instant and the card's
history (its first charge try and its last update), so a scenario gives the same answer
however the calls are ordered or replayed:

- `clears_after`: from this long after the card's first charge try (funds arrive later);
- `paydays` / `payday_dates`: on a payday (a day of the month, or a given date, in the
  scenario's time zone) and the `window_days` days after it; outside those windows the card
  declines again, as a balance that is spent down would;
- `clears_on_update`: once the card was updated (`SimulatedGateway.update_card`), as an
  expired card is by the card updater or the customer;
- no condition at all: the decline never clears (a hard decline, or a soft one that stays).

With `world_odds`, a try the clearing rules leave declined still succeeds with the chance the
gateway's world gives (`recoup.payments.world.success_probability`) at the try's local time
in `timezone`, for the segment of `decline_code`, `network` and `country`: timing matters
alongside the rules (a hard decline's chance is 0 in every world).

With several conditions, `combine` says whether any one of them clears the card (`ANY`, the
default) or all must hold at once (`ALL`: e.g. "after three days, and only around a payday").

The charge status comes from the decline taxonomy: a decline whose class is `never` (or
`not_applicable`) is `FAILED_TERMINAL`; `soft` and `customer_action` are `FAILED_RETRYABLE`
(a customer-action decline is retryable once the customer acts; its decline code tells the
planner to wait for that).
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum

from recoup.dunning.taxonomy import DeclineClass, classify
from recoup.errors import InvalidInput
from recoup.payments.provider import ChargeStatus
from recoup.timekeeping.instants import require_aware
from recoup.timekeeping.zones import zone

MAX_WINDOW_DAYS = 27  # a payday window shorter than any month, so windows never merge
DEFAULT_WINDOW_DAYS = 3  # days after a payday that the funds are still there


class Combine(StrEnum):
    ANY = "any"  # any one condition clears the card
    ALL = "all"  # every condition must hold at the charge's instant


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A card that declines with `decline_code` (and `advice_code`) until it clears.

    `probability` is the chance that a try declines while the card has not cleared (1.0:
    always); the gateway draws it deterministically from its seed and the idempotency key.
    """

    decline_code: str
    advice_code: str | None = None
    clears_after: timedelta | None = None
    paydays: tuple[int, ...] = ()
    payday_dates: tuple[date, ...] = ()
    window_days: int = DEFAULT_WINDOW_DAYS
    timezone: str = "UTC"
    clears_on_update: bool = False
    combine: Combine = Combine.ANY
    probability: float = 1.0
    world_odds: bool = False
    network: str | None = None
    country: str | None = None

    def __post_init__(self) -> None:
        if not self.decline_code or self.decline_code != self.decline_code.strip():
            raise InvalidInput("decline_code", self.decline_code, "expected a decline code")
        if self.advice_code is not None and not self.advice_code.strip():
            raise InvalidInput("advice_code", self.advice_code, "expected an advice code or none")
        if self.clears_after is not None and self.clears_after <= timedelta(0):
            raise InvalidInput("clears_after", self.clears_after, "expected a positive duration")
        for day in self.paydays:
            if isinstance(day, bool) or not isinstance(day, int) or not 1 <= day <= 31:
                raise InvalidInput("paydays", day, "expected days of the month, 1–31")
        for payday in self.payday_dates:
            if isinstance(payday, datetime) or not isinstance(payday, date):
                raise InvalidInput("payday_dates", payday, "expected calendar dates")
        if not 0 <= self.window_days <= MAX_WINDOW_DAYS:
            raise InvalidInput("window_days", self.window_days, f"expected 0–{MAX_WINDOW_DAYS}")
        zone(self.timezone)
        if not 0.0 < self.probability <= 1.0:
            raise InvalidInput("probability", self.probability, "expected a number in (0, 1]")
        object.__setattr__(self, "combine", Combine(self.combine))
        for name in ("network", "country"):
            value = getattr(self, name)
            if value is not None and (not value or value != value.strip()):
                raise InvalidInput(name, value, f"expected a {name} code or none")

    @classmethod
    def soft(
        cls,
        decline_code: str = "insufficient_funds",
        *,
        advice_code: str | None = None,
        clears_after: timedelta | None = None,
        paydays: tuple[int, ...] = (),
        payday_dates: tuple[date, ...] = (),
        window_days: int = DEFAULT_WINDOW_DAYS,
        timezone: str = "UTC",
        combine: Combine = Combine.ANY,
        probability: float = 1.0,
    ) -> Scenario:
        """A soft decline that clears with time and/or around paydays."""
        return cls(
            decline_code=decline_code,
            advice_code=advice_code,
            clears_after=clears_after,
            paydays=paydays,
            payday_dates=payday_dates,
            window_days=window_days,
            timezone=timezone,
            combine=combine,
            probability=probability,
        )

    @classmethod
    def hard(cls, decline_code: str = "stolen_card", *, advice_code: str | None = None) -> Scenario:
        """A decline that never clears (`stolen_card`; `do_not_honor` + `do_not_try_again`)."""
        return cls(decline_code=decline_code, advice_code=advice_code)

    @classmethod
    def expired(cls) -> Scenario:
        """An expired card: `expired_card` until the card is updated."""
        return cls(decline_code="expired_card", clears_on_update=True)

    @property
    def status(self) -> ChargeStatus:
        """The status of this scenario's declines (see the module docstring)."""
        advice = (self.advice_code,) if self.advice_code else ()
        verdict = classify(self.decline_code, advice).decline_class
        if verdict in (DeclineClass.NEVER, DeclineClass.NOT_APPLICABLE):
            return ChargeStatus.FAILED_TERMINAL
        return ChargeStatus.FAILED_RETRYABLE

    def declines_at(
        self, instant: datetime, *, first_try: datetime, updated_at: datetime | None
    ) -> bool:
        """Whether a try at `instant` is declined (before `probability` is drawn), for a card
        first tried at `first_try` and last updated at `updated_at` (None: never)."""
        require_aware("instant", instant)
        conditions: list[bool] = []
        if self.clears_after is not None:
            # A difference, not `first_try + clears_after`, which could pass year 9999.
            conditions.append(instant - first_try >= self.clears_after)
        if self.paydays or self.payday_dates:
            conditions.append(self.in_payday_window(instant))
        if self.clears_on_update:
            conditions.append(updated_at is not None and instant >= updated_at)
        if not conditions:
            return True
        cleared = any(conditions) if self.combine is Combine.ANY else all(conditions)
        return not cleared

    def in_payday_window(self, instant: datetime) -> bool:
        """Whether the local date of `instant` is a payday or within `window_days` after one."""
        local = instant.astimezone(zone(self.timezone)).date()
        for back in range(self.window_days + 1):
            day = local - timedelta(days=back)
            if day in self.payday_dates:
                return True
            # A payday past the month's end (the 31st in April) falls on its last day, as card
            # billing clamps an anchor.
            last = calendar.monthrange(day.year, day.month)[1]
            if any(min(payday, last) == day.day for payday in self.paydays):
                return True
        return False


__all__ = ["DEFAULT_WINDOW_DAYS", "MAX_WINDOW_DAYS", "Combine", "Scenario"]
