"""Properties of the gateway under any mix of repeated keys, faults and time: money moves at
most once per key, and a caller that keeps to one key per attempt and reconciles before a new
attempt never charges an invoice twice."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from recoup.payments import (
    Charge,
    ChargeStatus,
    Fault,
    FaultKind,
    IdempotencyKeyMismatch,
    ProviderTimeout,
    ProviderUnavailable,
    Scenario,
    SimulatedGateway,
)
from recoup.timekeeping.clock import VirtualClock
from tests.payments.conftest import START, RecordedSleep, make_request

CARDS = {
    "card_ok": None,
    "card_nsf": Scenario.soft(clears_after=timedelta(hours=30)),
    "card_payday": Scenario.soft(paydays=(1, 15), window_days=1),
    "card_lost": Scenario.hard("lost_card"),
    "card_exp": Scenario.expired(),
    "card_flaky": Scenario.soft("processing_error", probability=0.5),
}

amounts = st.integers(min_value=1, max_value=10**9)  # minor units


@st.composite
def faults(draw: st.DrawFn) -> Fault:
    kind = draw(st.sampled_from(list(FaultKind)))
    scope = draw(st.sampled_from(["times", "key", "window"]))
    delay = draw(st.sampled_from([0.0, 1.5])) if kind is not FaultKind.SLOW else 2.0
    if scope == "key":
        return Fault(kind=kind, idempotency_key=f"k{draw(st.integers(0, 5))}", delay_seconds=delay)
    if scope == "window":
        start = START + timedelta(hours=draw(st.integers(0, 72)))
        end = start + timedelta(hours=draw(st.integers(1, 12)))
        return Fault(kind=kind, start=start, end=end, delay_seconds=delay)
    return Fault(kind=kind, times=draw(st.integers(1, 3)), delay_seconds=delay)


# One operation on the gateway: ("charge", key index, amount change, hours later),
# ("fault", Fault), ("advance", hours) or ("update", card).
operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("charge"), st.integers(0, 5), st.sampled_from([0, 0, 0, 1]), st.integers(0, 48)
        ),
        st.tuples(st.just("fault"), faults()),
        st.tuples(st.just("advance"), st.integers(1, 24)),
        st.tuples(st.just("update"), st.sampled_from(sorted(CARDS))),
    ),
    max_size=40,
)


@given(
    ops=operations,
    prices=st.lists(amounts, min_size=6, max_size=6),
    seed=st.integers(0, 2**32),
)
def test_money_moves_at_most_once_per_key_whatever_the_faults(
    ops: list[tuple[object, ...]], prices: list[int], seed: int
) -> None:
    clock = VirtualClock(START)
    gateway = SimulatedGateway(clock, seed=seed, sleep=RecordedSleep())
    for fingerprint, scenario in CARDS.items():
        gateway.add_card(fingerprint, scenario)
    cards = sorted(CARDS)
    first_answer: dict[str, Charge] = {}
    for op in ops:
        if op[0] == "charge":
            _, index, change, hours = op
            assert isinstance(index, int) and isinstance(change, int) and isinstance(hours, int)
            # Key k<i> always charges invoice inv_<i> with one card: one key per invoice.
            request = make_request(
                f"k{index}",
                invoice_id=f"inv_{index}",
                amount=prices[index] + change,
                card=cards[index],
                at=clock.now() + timedelta(hours=hours),
            )
            try:
                charge = gateway.charge(request)
            except (ProviderTimeout, ProviderUnavailable):
                continue
            except IdempotencyKeyMismatch:
                # Refused only when the key's recorded charge has other terms.
                (recorded,) = [
                    c
                    for c in gateway.charges_for_invoice(request.invoice_id)
                    if c.idempotency_key == request.idempotency_key
                ]
                assert recorded.amount != request.amount
                continue
            assert first_answer.setdefault(request.idempotency_key, charge) == charge
        elif op[0] == "fault":
            assert isinstance(op[1], Fault)
            gateway.inject(op[1])
        elif op[0] == "advance":
            assert isinstance(op[1], int)
            clock.advance(timedelta(hours=op[1]))
        else:
            assert isinstance(op[1], str)
            gateway.update_card(op[1])

    per_key = gateway.charges_per_key()
    assert all(count <= 1 for count in per_key.values())
    successes = gateway.successful_charges()
    assert len(successes) == sum(per_key.values())
    assert len({c.idempotency_key for c in successes}) == len(successes)
    assert gateway.double_charged_invoices() == []
    for index in range(6):
        total = gateway.total_charged(f"inv_{index}")
        assert total in (0, prices[index], prices[index] + 1)  # at most one charge's amount
        assert total == sum(c.amount for c in successes if c.idempotency_key == f"k{index}")


@dataclass
class Invoice:
    id: str
    amount: int
    card: str
    attempt: int = 1
    settled: bool = False  # paid, or out of attempts


def _outcome(charge: Charge, invoice: Invoice, max_attempts: int) -> None:
    """Move the invoice on after a known answer for its current key."""
    if charge.status is ChargeStatus.SUCCEEDED or invoice.attempt >= max_attempts:
        invoice.settled = True
    else:
        invoice.attempt += 1


@given(
    invoices=st.lists(st.tuples(amounts, st.sampled_from(sorted(CARDS))), min_size=1, max_size=4),
    injected=st.lists(faults(), max_size=8),
    gaps=st.lists(st.integers(1, 36), min_size=1, max_size=8),
    seed=st.integers(0, 2**32),
)
def test_a_reconciling_caller_never_charges_an_invoice_twice(
    invoices: list[tuple[int, str]], injected: list[Fault], gaps: list[int], seed: int
) -> None:
    clock = VirtualClock(START)
    gateway = SimulatedGateway(clock, seed=seed, sleep=RecordedSleep())
    for fingerprint, scenario in CARDS.items():
        gateway.add_card(fingerprint, scenario)
    for fault in injected:
        gateway.inject(fault)
    open_invoices = [
        Invoice(id=f"inv_{i}", amount=amount, card=card)
        for i, (amount, card) in enumerate(invoices)
    ]
    max_attempts = 4
    for step in range(60):
        for invoice in open_invoices:
            if invoice.settled:
                continue
            key = f"charge:{invoice.id}:{invoice.attempt}"
            request = make_request(
                key, invoice_id=invoice.id, amount=invoice.amount, card=invoice.card
            )
            try:
                charge = gateway.charge(request)
            except ProviderUnavailable:
                continue  # nothing happened: the same key again later
            except ProviderTimeout:
                try:
                    found = gateway.find_charge(key)
                except ProviderUnavailable:
                    continue  # unknown still: never a new key until this one is known
                if found is None:
                    continue  # not made: the same key again later
                charge = found
            _outcome(charge, invoice, max_attempts)
        clock.advance(timedelta(hours=gaps[step % len(gaps)]))

    assert gateway.double_charged_invoices() == []
    assert all(count <= 1 for count in gateway.charges_per_key().values())
    for invoice in open_invoices:
        assert gateway.total_charged(invoice.id) in (0, invoice.amount)
