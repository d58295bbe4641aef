"""The simulated gateway: an in-process `PaymentProvider` with card scenarios, injected faults
and honest counts of the money it moved.

    gateway = SimulatedGateway(VirtualClock(start), seed=7, sleep=fake_sleep)
    gateway.add_card("card_nsf", Scenario.soft(clears_after=timedelta(days=3)))
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    gateway.charge(ChargeRequest(idempotency_key="charge:inv_1:1", ...))  # ProviderTimeout
    gateway.find_charge("charge:inv_1:1")                                 # the charge it made

Contract:

- time is `request.at` when given, else the gateway's clock: scenarios, fault windows and
  `Charge.created_at` all use it (`find_charge` uses the clock);
- a card with no scenario, and a charge with no card, succeed;
- one idempotency key is one charge: a repeat returns the first `Charge` (a decline
  included) and charges nothing; a repeat with another amount, currency or invoice raises
  `IdempotencyKeyMismatch`, naming the key;
- faults (`recoup.payments.faults`) are applied before and after the charge as their kinds
  say; a delay is slept outside the lock, with the injected `sleep`, so a slow call never
  holds up the others;
- the counts (`charges_per_key`, `double_charged_invoices`, `stats`) record what happened,
  not what should have happened, so tests can prove that money moved at most once.

A scenario with `world_odds` succeeds, when its rules leave a retry declined, with the chance
the gateway's `world` gives at the try's local time (default: the packaged calibrated world),
after the card's first try and the invoice's earlier tries the gateway has seen; an invoice's
first try (the failure that opens dunning) keeps to the rules.

Charge ids and the `probability` and world draws of scenarios are hashes of the seed and the
key, so a run is the same whatever the order of its calls. Every method is thread-safe.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from recoup.errors import InvalidInput, NotFound
from recoup.payments.faults import Fault, FaultKind
from recoup.payments.faults_in_force import FaultsInForce, InjectedFault
from recoup.payments.provider import (
    Charge,
    ChargeRequest,
    ChargeStatus,
    IdempotencyKeyMismatch,
    ProviderTimeout,
    ProviderUnavailable,
)
from recoup.payments.scenarios import Scenario
from recoup.payments.world import Segment, TryHistory, World, packaged_world, success_probability
from recoup.timekeeping.clock import Clock
from recoup.timekeeping.instants import require_aware, to_utc
from recoup.timekeeping.zones import zone

Sleep = Callable[[float], None]  # seconds


@dataclass(frozen=True, kw_only=True)
class GatewayStats:
    """What the gateway has done so far.

    `calls` counts charge calls; `deliveries` the times a request was processed (a duplicate
    delivery counts twice); `replays` the deliveries answered from a key's first charge;
    `refused` the calls refused as unavailable; `timeouts` the calls that raised
    `ProviderTimeout`; `faults_fired` counts by fault kind.
    """

    calls: int
    deliveries: int
    replays: int
    succeeded: int
    declined: int
    refused: int
    timeouts: int
    faults_fired: dict[str, int]
    charges_per_key: dict[str, int]
    double_charged_invoices: list[str]


@dataclass(kw_only=True)
class _Card:
    scenario: Scenario | None = None
    first_try: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class _Record:
    """A key's first charge, and the terms a repeat of it must match."""

    charge: Charge
    invoice_id: str
    amount: int
    currency: str


class SimulatedGateway:
    """A `PaymentProvider` that moves pretend money (see the module docstring)."""

    def __init__(
        self,
        clock: Clock,
        *,
        seed: int = 0,
        sleep: Sleep = time.sleep,
        world: World | None = None,
    ) -> None:
        self._clock = clock
        self._world = world
        self._seed = seed
        self._sleep = sleep
        self._lock = threading.Lock()
        self._cards: dict[str, _Card] = {}
        self._records: dict[str, _Record] = {}
        self._by_invoice: dict[str, list[Charge]] = {}
        self._moved: dict[str, int] = {}  # key → times money moved under it
        self._successes: list[Charge] = []
        self._faults = FaultsInForce()
        self._calls = 0
        self._deliveries = 0
        self._replays = 0
        self._declined = 0
        self._refused = 0
        self._timeouts = 0

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def world(self) -> World:
        """The world whose odds `world_odds` scenarios follow."""
        return self._world or packaged_world()

    # Cards.

    def add_card(self, fingerprint: str, scenario: Scenario | None = None) -> None:
        """Give the card a scenario (None: it always succeeds). Replaces any earlier one and
        forgets the card's history, as a new card would."""
        _require_name("fingerprint", fingerprint)
        with self._lock:
            self._cards[fingerprint] = _Card(scenario=scenario)

    def update_card(self, fingerprint: str, *, at: datetime | None = None) -> datetime:
        """Record that the card's details were updated at `at` (default: the clock's now);
        scenarios that clear on update succeed from then on. Returns the instant.
        `NotFound` for a card that was never added nor charged."""
        instant = _utc("at", at) if at is not None else self._now()
        with self._lock:
            card = self._cards.get(fingerprint)
            if card is None:
                raise NotFound(f"no card {fingerprint!r}: add it or charge it first")
            card.updated_at = instant
        return instant

    # Faults.

    # Faults (`faults_in_force.FaultsInForce`, under the gateway's lock).

    def inject(self, fault: Fault) -> str:
        """Put `fault` in force; returns its id."""
        with self._lock:
            return self._faults.inject(fault)

    def remove_fault(self, fault_id: str) -> None:
        """Take one fault out of force; `NotFound` if it is not (any more) in force."""
        with self._lock:
            self._faults.remove(fault_id)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def faults(self) -> list[InjectedFault]:
        """The faults in force, oldest first."""
        with self._lock:
            return self._faults.listed()

    # The provider protocol.

    def charge(self, request: ChargeRequest) -> Charge:
        """Charge once per key, through the faults in force (see the module docstring)."""
        instant = _utc("at", request.at) if request.at is not None else self._now()
        with self._lock:
            self._calls += 1
            fired = self._faults.fire(request, instant)
            self._refused += fired.refused
            self._timeouts += fired.timeouts
            charge: Charge | None = None
            if fired.stop is None:
                charge = self._deliver(request, instant)
        if charge is not None and fired.duplicate:
            # The second delivery takes the lock anew, as a retried request would arrive.
            with self._lock:
                self._deliver(request, instant)
        if fired.delay:
            self._sleep(fired.delay)
        if fired.stop is not None and fired.stop.kind is FaultKind.UNAVAILABLE:
            raise ProviderUnavailable(
                f"the gateway is unavailable ({fired.stop.describe()}); nothing was charged"
            )
        if fired.stop is not None or fired.timeout_after or charge is None:
            raise ProviderTimeout(
                f"the gateway timed out; the charge under key {request.idempotency_key!r} "
                "may or may not have been made: look the key up"
            )
        return charge

    def find_charge(self, idempotency_key: str) -> Charge | None:
        """The key's charge, or None; `ProviderUnavailable` during an outage (clock time)."""
        now = self._now()
        with self._lock:
            outage = self._faults.outage_at(now)
            if outage is not None:
                raise ProviderUnavailable(f"the gateway is unavailable ({outage.describe()})")
            record = self._records.get(idempotency_key)
            return record.charge if record else None

    # Counts.

    def charges_per_key(self) -> dict[str, int]:
        """Every key that was processed → how many times money moved under it (0: declined)."""
        with self._lock:
            return dict(self._moved)

    def successful_charges(self) -> list[Charge]:
        """Every charge that moved money, in order."""
        with self._lock:
            return list(self._successes)

    def charges_for_invoice(self, invoice_id: str) -> list[Charge]:
        """Every charge (declines included) made for the invoice, in order."""
        with self._lock:
            return list(self._by_invoice.get(invoice_id, ()))

    def total_charged(self, invoice_id: str) -> int:
        """Minor units actually charged for the invoice."""
        with self._lock:
            return sum(
                c.amount
                for c in self._by_invoice.get(invoice_id, ())
                if c.status is ChargeStatus.SUCCEEDED
            )

    def double_charged_invoices(self) -> list[str]:
        """Invoices with more than one successful charge (under any keys), sorted."""
        with self._lock:
            return self._double_charged()

    def stats(self) -> GatewayStats:
        with self._lock:
            return GatewayStats(
                calls=self._calls,
                deliveries=self._deliveries,
                replays=self._replays,
                succeeded=len(self._successes),
                declined=self._declined,
                refused=self._refused,
                timeouts=self._timeouts,
                faults_fired=dict(sorted(self._faults.fired.items())),
                charges_per_key=dict(self._moved),
                double_charged_invoices=self._double_charged(),
            )

    # Internals: every method below runs under the lock.

    def _now(self) -> datetime:
        return require_aware("clock.now()", self._clock.now()).astimezone(UTC)

    def _deliver(self, request: ChargeRequest, instant: datetime) -> Charge:
        """Process one delivery of the request: replay the key's charge, or make it."""
        self._deliveries += 1
        key = request.idempotency_key
        record = self._records.get(key)
        if record is not None:
            if (record.invoice_id, record.amount, record.currency) != _terms(request):
                raise IdempotencyKeyMismatch(
                    key,
                    f"the key was used for {record.amount} {record.currency} on invoice "
                    f"{record.invoice_id!r}; a repeat must have the same amount, currency and "
                    "invoice (use a new key for a new charge)",
                )
            self._replays += 1
            return record.charge
        charge = self._decide(request, instant)
        self._records[key] = _Record(
            charge=charge,
            invoice_id=request.invoice_id,
            amount=request.amount,
            currency=request.currency.lower(),
        )
        self._by_invoice.setdefault(request.invoice_id, []).append(charge)
        self._moved.setdefault(key, 0)
        if charge.status is ChargeStatus.SUCCEEDED:
            self._moved[key] += 1  # counted where the money moves, not inferred from the key
            self._successes.append(charge)
        else:
            self._declined += 1
        return charge

    def _decide(self, request: ChargeRequest, instant: datetime) -> Charge:
        key = request.idempotency_key
        scenario: Scenario | None = None
        card: _Card | None = None
        if request.card is not None:
            card = self._cards.setdefault(request.card, _Card())
            if card.first_try is None or instant < card.first_try:
                card.first_try = instant
            scenario = card.scenario
        declined = (
            scenario is not None
            and card is not None
            and card.first_try is not None
            and scenario.declines_at(instant, first_try=card.first_try, updated_at=card.updated_at)
            and self._draw(key) < scenario.probability
        )
        earlier = sum(c.created_at < instant for c in self._by_invoice.get(request.invoice_id, ()))
        if declined and scenario is not None and scenario.world_odds and card and earlier:
            declined = self._draw(key, "world") >= self._world_chance(
                scenario, instant, card, retries_before=earlier - 1
            )
        charge_id = "ch_" + self._hash("charge", key)[:24]
        if declined and scenario is not None:
            return Charge(
                id=charge_id,
                idempotency_key=key,
                status=scenario.status,
                amount=request.amount,
                currency=request.currency,
                created_at=instant,
                decline_code=scenario.decline_code,
                advice_code=scenario.advice_code,
            )
        return Charge(
            id=charge_id,
            idempotency_key=key,
            status=ChargeStatus.SUCCEEDED,
            amount=request.amount,
            currency=request.currency,
            created_at=instant,
        )

    def _world_chance(
        self, scenario: Scenario, instant: datetime, card: _Card, *, retries_before: int
    ) -> float:
        """The world's chance for a retry (never the invoice's first try, the failure itself),
        after the card's first try and `retries_before` retries of the invoice."""
        segment = Segment(
            decline_code=scenario.decline_code,
            network=scenario.network,
            country=scenario.country,
            advice_codes=(scenario.advice_code,) if scenario.advice_code else (),
        )
        history = TryHistory(
            first_failed_at=card.first_try or instant, retries_before=retries_before
        )
        local = instant.astimezone(zone(scenario.timezone))
        return success_probability(self.world, segment, local, history)

    def _draw(self, key: str, purpose: str = "draw") -> float:
        """A uniform number in [0, 1) fixed by the seed, the key and the purpose."""
        return int(self._hash(purpose, key)[:16], 16) / 2**64

    def _hash(self, purpose: str, key: str) -> str:
        return hashlib.sha256(f"{self._seed}\x00{purpose}\x00{key}".encode()).hexdigest()

    def _double_charged(self) -> list[str]:
        return sorted(
            invoice
            for invoice, charges in self._by_invoice.items()
            if sum(c.status is ChargeStatus.SUCCEEDED for c in charges) > 1
        )


def _terms(request: ChargeRequest) -> tuple[str, int, str]:
    return (request.invoice_id, request.amount, request.currency.lower())


def _utc(field_name: str, instant: datetime) -> datetime:
    # Bounded years (`to_utc`): a typo'd year 1 or 9999 is refused by name, not left to
    # overflow in the clearing arithmetic.
    return to_utc(field_name, instant)


def _require_name(field_name: str, value: str) -> None:
    if not isinstance(value, str) or not value or value != value.strip():
        raise InvalidInput(field_name, value, "expected a non-empty name without outer spaces")


__all__ = ["GatewayStats", "SimulatedGateway", "Sleep"]
