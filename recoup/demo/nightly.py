"""The old way, for comparison: a nightly batch at 00:00 UTC that retries every unpaid invoice
on fixed days after its failure, whatever the decline (hard declines included) and whatever
the customer's time zone.

Simulated in-process, not through HTTP: the same customers, the same card scenarios at a
`SimulatedGateway` of its own (no injected faults), the same card updates and out-of-band
payments at their instants. Every night's attempts count in the minute of 00:00 UTC, as a
batch that starts then sends them (the replay's convention, `recoup replay --compare
nightly`).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from recoup.demo.population import MONTH_START, Customer, generate
from recoup.dunning.taxonomy import DeclineClass, classify
from recoup.errors import RecoupError
from recoup.payments import ChargeRequest, ChargeStatus, SimulatedGateway
from recoup.payments.world import World
from recoup.timekeeping.clock import VirtualClock

RETRY_DAYS = (1, 3, 5, 7)  # UTC days after the failure's UTC date, each at 00:00 UTC


@dataclass(frozen=True, kw_only=True)
class BatchFigures:
    """What one way of retrying did with the month's failures."""

    invoices: int
    recovered_by_retry: int
    paid_out_of_band: int
    attempts: int  # charges sent to the gateway
    attempts_on_hard_declines: int  # never approvable: fees, and no chance of recovery
    peak_per_minute: int
    peak_minute: str | None  # "2026-10-02T00:00Z"

    @property
    def recovery_rate(self) -> float:
        return self.recovered_by_retry / self.invoices if self.invoices else 0.0


def nightly_batch(
    customers: Sequence[Customer], *, seed: int, world: World | None = None
) -> BatchFigures:
    """Run the month's failures through the nightly batch (see the module docstring), in
    `world` when the customers follow one."""
    gateway = SimulatedGateway(
        VirtualClock(MONTH_START), seed=seed, sleep=lambda _: None, world=world
    )
    for c in customers:
        gateway.add_card(c.card, c.scenario())
        if c.card_updated_at is not None:
            # The scenarios go by instants: a card updated at t clears for charges from t.
            gateway.update_card(c.card, at=c.card_updated_at)
    runs: list[tuple[datetime, Customer]] = []
    for c in customers:
        _charge(gateway, c, f"initial:{c.invoice_id}", c.failed_at)  # the renewal that failed
        day = datetime.combine(c.failed_at.astimezone(UTC).date(), datetime.min.time(), UTC)
        runs += [(day + timedelta(days=n), c) for n in RETRY_DAYS]
    runs.sort(key=lambda run: (run[0], run[1].invoice_id))
    recovered: set[str] = set()
    per_minute: Counter[datetime] = Counter()
    attempts = hard = 0
    for n, (night, c) in enumerate(runs):
        if c.invoice_id in recovered:
            continue
        if c.paid_out_of_band_at is not None and c.paid_out_of_band_at <= night:
            continue  # paid another way before this night: nothing to collect
        attempts += 1
        per_minute[night] += 1
        if classify(c.decline_code, _advice(c)).decline_class is DeclineClass.NEVER:
            hard += 1
        if _charge(gateway, c, f"nightly:{c.invoice_id}:{n}", night):
            recovered.add(c.invoice_id)
    paid = sum(
        1 for c in customers if c.paid_out_of_band_at is not None and c.invoice_id not in recovered
    )
    peak = min(per_minute, key=lambda m: (-per_minute[m], m)) if per_minute else None
    return BatchFigures(
        invoices=len(customers),
        recovered_by_retry=len(recovered),
        paid_out_of_band=paid,
        attempts=attempts,
        attempts_on_hard_declines=hard,
        peak_per_minute=per_minute[peak] if peak is not None else 0,
        peak_minute=peak.strftime("%Y-%m-%dT%H:%MZ") if peak is not None else None,
    )


class NightlyProcess:
    """The nightly batch of the demo's customers for `seed` and `size`, in a process of its
    own started at once (it needs nothing of the run, whose process is the busy one): the
    customers are drawn there again, the same. `result()` waits for its figures."""

    def __init__(self, *, seed: int, size: int, scenarios: Path | None = None) -> None:
        argv = [sys.executable, "-m", "recoup.demo.nightly", str(seed), str(size)]
        if scenarios is not None:
            argv.append(str(scenarios))
        self._process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def result(self) -> BatchFigures:
        out, err = self._process.communicate()
        if self._process.returncode != 0:
            raise RecoupError(f"the nightly batch failed: {err.decode(errors='replace')[-500:]}")
        return BatchFigures(**json.loads(out))

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.communicate()


def main(argv: list[str]) -> None:
    """`python -m recoup.demo.nightly SEED SIZE [SCENARIOS]`: the figures as one JSON object."""
    from recoup.demo.billing_side import scenario_world

    seed, size = int(argv[0]), int(argv[1])
    world = scenario_world(Path(argv[2])) if len(argv) > 2 else None
    customers = generate(seed, size, world_odds=world is not None)
    figures = nightly_batch(customers, seed=seed, world=world)
    sys.stdout.write(json.dumps(dataclasses.asdict(figures)) + "\n")


def _advice(c: Customer) -> tuple[str, ...]:
    return (c.advice_code,) if c.advice_code else ()


def _charge(gateway: SimulatedGateway, c: Customer, key: str, at: datetime) -> bool:
    charge = gateway.charge(
        ChargeRequest(
            idempotency_key=key,
            invoice_id=c.invoice_id,
            customer_id=c.customer_id,
            amount=c.amount,
            currency=c.currency,
            card=c.card,
            at=at,
        )
    )
    return charge.status is ChargeStatus.SUCCEEDED


__all__ = ["RETRY_DAYS", "BatchFigures", "NightlyProcess", "nightly_batch"]

if __name__ == "__main__":
    main(sys.argv[1:])
