"""Property: whatever the interleaving of Recoup's deliveries, duplicates, injected provider
timeouts and outages, handlers killed mid-charge and locks abandoned by dead handlers, money
moves at most once per key and at most once per invoice, a settled attempt always gets the
same answer, and once things calm down the invoice's state agrees with the provider's.

Deliveries follow Recoup's contract: attempt n+1 exists only after attempt n was answered
`failed`; any earlier delivery may be repeated at any time (duplicate triggers); a 5xx, a 409
or `pending` is followed, sooner or later, by the same attempt again.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.payments import Fault, FaultKind, Scenario, SimulatedGateway
from recoup.payments.provider import Charge, ChargeRequest
from recoup.receiver import ChargeEndpoint, HttpResponse, IdempotencyStore, body_fingerprint
from recoup.timekeeping.clock import VirtualClock

from .conftest import NOW, SECRET, Db, body_of, signed

MAX_ATTEMPTS = 4
LOCK_TIMEOUT = timedelta(seconds=90)


class Killed(BaseException):
    """The handler's process dies (after the provider answered, before the commit)."""


class KillAfterCharge:
    """The gateway, with a switch that kills the handler right after a charge call returns."""

    def __init__(self, inner: SimulatedGateway) -> None:
        self.inner = inner
        self.armed = False
        self.kills = 0

    def charge(self, request: ChargeRequest) -> Charge:
        charge = self.inner.charge(request)
        if self.armed:
            self.armed = False
            self.kills += 1
            raise Killed
        return charge

    def find_charge(self, idempotency_key: str) -> Charge | None:
        return self.inner.find_charge(idempotency_key)


@dataclass(frozen=True)
class Deliver:
    again: bool  # a duplicate of an earlier delivery, rather than Recoup's next request
    pick: int  # which earlier delivery, for a duplicate
    fault: str | None  # what goes wrong at the provider during this delivery


@dataclass(frozen=True)
class Abandon:
    """A handler claims the latest attempt's key and dies before doing anything."""


@dataclass(frozen=True)
class PayByHand:
    """The customer pays through another channel: the invoice is marked paid."""


@dataclass(frozen=True)
class Wait:
    seconds: int


FAULTS = [None, None, "timeout_before", "timeout_after", "unavailable", "kill"]
steps = st.lists(
    st.one_of(
        st.builds(Deliver, st.booleans(), st.integers(0, 20), st.sampled_from(FAULTS)),
        st.just(Abandon()),
        st.just(PayByHand()),
        st.builds(Wait, st.sampled_from([1, 100])),  # 100 s outlives the lock timeout
    ),
    max_size=14,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(steps=steps, clears_after_days=st.sampled_from([None, 0, 1, 2, 9]))
def test_any_interleaving_moves_money_at_most_once(
    db: Db, steps: list[object], clears_after_days: int | None
) -> None:
    # One invoice per example, with its own keys: examples share the test's database.
    invoice = f"inv_{uuid.uuid4().hex[:10]}"
    card = f"card_{invoice}"
    db.add_invoice(invoice, card=card)
    gateway = SimulatedGateway(VirtualClock(NOW), seed=3)
    if clears_after_days:
        gateway.add_card(card, Scenario.soft(clears_after=timedelta(days=clears_after_days)))
    elif clears_after_days == 0:
        gateway.add_card(card, Scenario.hard("stolen_card"))
    provider = KillAfterCharge(gateway)
    endpoint = ChargeEndpoint(
        database=db.database,
        provider=provider,
        invoices=db.invoices,
        secret=SECRET,
        lock_timeout=LOCK_TIMEOUT,
    )
    now = NOW
    delivered: list[int] = []  # attempts, in delivery order
    failed: set[int] = set()  # attempts that were answered "failed"
    final: dict[int, bytes] = {}  # attempt → its first final answer
    paid_by_hand = False

    def body(n: int) -> bytes:
        # Attempt n is scheduled n-1 days after the first: the card may clear meanwhile.
        return json.dumps(body_of(invoice, n, scheduled_at=NOW + timedelta(days=n - 1))).encode()

    def deliver(n: int) -> HttpResponse | None:
        headers, raw = signed(body(n), at=now)
        try:
            answer = endpoint.handle(headers, raw, now=now)
        except Killed:
            return None
        finally:
            gateway.clear_faults()
            provider.armed = False
        assert answer.status in (200, 409, 503), answer.body
        if answer.status == 200:
            outcome = answer.json()["outcome"]
            if outcome == "failed":
                failed.add(n)
            if outcome != "pending":
                # A settled attempt always gets the same answer.
                assert final.setdefault(n, answer.body) == answer.body
        return answer

    for step in steps:
        match step:
            case Deliver(again=again, pick=pick, fault=fault):
                if again and delivered:
                    n = delivered[pick % len(delivered)]
                elif not delivered:
                    n = 1
                else:
                    latest = max(delivered)
                    n = latest + 1 if latest in failed and latest < MAX_ATTEMPTS else latest
                if fault == "kill":
                    provider.armed = True
                elif fault is not None:
                    gateway.inject(Fault(kind=FaultKind(fault), times=1))
                delivered.append(n)
                deliver(n)
            case Abandon() if delivered:
                n = max(delivered)
                IdempotencyStore(db.database).begin(
                    f"retry:{invoice}:{n}", body_fingerprint(body(n)), now=now
                )
            case PayByHand():
                db.pay_by_hand(invoice)
                paid_by_hand = True
            case Wait(seconds=seconds):
                now += timedelta(seconds=seconds)

    stats = gateway.stats()
    assert all(count <= 1 for count in gateway.charges_per_key().values())
    assert gateway.double_charged_invoices() == []
    # The receiver charges a key again only when it cannot know it was charged (it was killed
    # before recording the answer); then the provider's idempotency returns the first charge.
    assert stats.replays <= provider.kills

    # Calm: no faults, locks expired; Recoup asks the latest attempt once more.
    if delivered:
        now += LOCK_TIMEOUT
        answer = deliver(max(delivered))
        assert answer is not None and answer.status == 200
    successes = [c for c in gateway.successful_charges() if c.idempotency_key.startswith("charge:")]
    if successes and not paid_by_hand:
        assert db.status(invoice) == "paid"
    if not paid_by_hand and db.status(invoice) == "paid":
        assert len(successes) == 1
