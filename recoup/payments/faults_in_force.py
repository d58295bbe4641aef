"""The faults in force in the simulated gateway (`gateway.SimulatedGateway`): injected,
listed, removed, and set off by a charge call as their kinds say (`faults.py`), with the
counts of those that fired. Not locked itself: the gateway calls it under its own lock.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from recoup.errors import NotFound
from recoup.payments.faults import Fault, FaultKind
from recoup.payments.provider import ChargeRequest


@dataclass(frozen=True, kw_only=True)
class InjectedFault:
    """A fault in force: its id (for removal), the fault, and the calls it has left (None:
    unlimited)."""

    id: str
    fault: Fault
    remaining: int | None


@dataclass(kw_only=True)
class _Injected:
    id: str
    fault: Fault
    remaining: int | None


@dataclass(kw_only=True)
class Fired:
    """The faults one call set off: the one that stops it (if any) and the rest."""

    stop: Fault | None = None
    duplicate: bool = False
    timeout_after: bool = False
    delay: float = 0.0  # seconds
    refused: int = 0  # calls refused as unavailable, for the gateway's counts
    timeouts: int = 0  # calls that time out


class FaultsInForce:
    """The faults in force, oldest first, and how many of each kind have fired."""

    def __init__(self) -> None:
        self._faults: list[_Injected] = []
        self._serial = 0
        self.fired: Counter[str] = Counter()

    def inject(self, fault: Fault) -> str:
        """Put `fault` in force; returns its id."""
        self._serial += 1
        fault_id = f"fault-{self._serial}"
        self._faults.append(_Injected(id=fault_id, fault=fault, remaining=fault.times))
        return fault_id

    def remove(self, fault_id: str) -> None:
        """Take one fault out of force; `NotFound` if it is not (any more) in force."""
        kept = [f for f in self._faults if f.id != fault_id]
        if len(kept) == len(self._faults):
            raise NotFound(f"no fault {fault_id!r} in force")
        self._faults = kept

    def clear(self) -> None:
        self._faults = []

    def listed(self) -> list[InjectedFault]:
        """The faults in force, oldest first."""
        return [InjectedFault(id=f.id, fault=f.fault, remaining=f.remaining) for f in self._faults]

    def outage_at(self, now: datetime) -> Fault | None:
        """The outage in force at `now`, if any (a look-up meets outages only)."""
        for injected in self._faults:
            if injected.fault.is_outage and injected.fault.covers(now):
                return injected.fault
        return None

    def fire(self, request: ChargeRequest, instant: datetime) -> Fired:
        """Set off the faults this call meets: at most one of each kind, the oldest first;
        an `UNAVAILABLE` or `TIMEOUT_BEFORE` fault stops the call and spares the rest."""
        fired = Fired()
        for kind in FaultKind:
            injected = next(
                (
                    f
                    for f in self._faults
                    if f.fault.kind is kind and f.fault.matches(request, instant)
                ),
                None,
            )
            if injected is None:
                continue
            if injected.remaining is not None:
                injected.remaining -= 1
                if injected.remaining == 0:
                    self._faults.remove(injected)
            self.fired[kind.value] += 1
            fired.delay += injected.fault.delay_seconds
            if kind in (FaultKind.UNAVAILABLE, FaultKind.TIMEOUT_BEFORE):
                fired.stop = injected.fault
                if kind is FaultKind.UNAVAILABLE:
                    fired.refused += 1
                else:
                    fired.timeouts += 1
                return fired
            if kind is FaultKind.DUPLICATE:
                fired.duplicate = True
            elif kind is FaultKind.TIMEOUT_AFTER:
                fired.timeout_after = True
                fired.timeouts += 1
        return fired


__all__ = ["FaultsInForce", "Fired", "InjectedFault"]
