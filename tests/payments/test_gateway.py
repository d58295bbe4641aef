"""The in-process simulated gateway: cards, idempotency, faults and counts."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from recoup.errors import InvalidInput, NotFound
from recoup.payments import (
    ChargeStatus,
    Fault,
    FaultKind,
    IdempotencyKeyMismatch,
    PaymentProvider,
    ProviderTimeout,
    ProviderUnavailable,
    Scenario,
    SimulatedGateway,
)
from recoup.timekeeping.clock import VirtualClock
from tests.payments.conftest import START, MakeRequest, RecordedSleep


def test_it_is_a_payment_provider(gateway: SimulatedGateway) -> None:
    provider: PaymentProvider = gateway
    assert provider.find_charge("nothing") is None


def test_a_card_with_no_scenario_succeeds_at_the_clocks_now(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    charge = gateway.charge(request_for(card="card_plain"))
    assert charge.status is ChargeStatus.SUCCEEDED
    assert charge.created_at == START
    assert (charge.amount, charge.currency) == (1999, "usd")
    assert charge.id.startswith("ch_")
    assert gateway.total_charged("inv_1") == 1999


def test_request_at_wins_over_the_clock(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    gateway.add_card("card_nsf", Scenario.soft(clears_after=timedelta(days=3)))
    declined = gateway.charge(request_for("k1", card="card_nsf"))
    assert declined.status is ChargeStatus.FAILED_RETRYABLE
    later = START + timedelta(days=3)
    charge = gateway.charge(request_for("k2", card="card_nsf", at=later))
    assert charge.status is ChargeStatus.SUCCEEDED
    assert charge.created_at == later


def test_a_soft_decline_carries_its_codes_and_clears_with_the_clock(
    gateway: SimulatedGateway, clock: VirtualClock, request_for: MakeRequest
) -> None:
    gateway.add_card("card_nsf", Scenario.soft("insufficient_funds", clears_after=timedelta(2)))
    declined = gateway.charge(request_for("k1", card="card_nsf"))
    assert (declined.status, declined.decline_code) == (
        ChargeStatus.FAILED_RETRYABLE,
        "insufficient_funds",
    )
    clock.advance(timedelta(days=1))
    assert gateway.charge(request_for("k2", card="card_nsf")).status is not ChargeStatus.SUCCEEDED
    clock.advance(timedelta(days=1))
    assert gateway.charge(request_for("k3", card="card_nsf")).status is ChargeStatus.SUCCEEDED
    assert gateway.total_charged("inv_1") == 1999


def test_a_hard_decline_is_terminal_with_its_advice_code(
    gateway: SimulatedGateway, clock: VirtualClock, request_for: MakeRequest
) -> None:
    gateway.add_card("card_dnh", Scenario.hard("do_not_honor", advice_code="do_not_try_again"))
    for attempt in range(3):
        charge = gateway.charge(request_for(f"k{attempt}", card="card_dnh"))
        assert charge.status is ChargeStatus.FAILED_TERMINAL
        assert (charge.decline_code, charge.advice_code) == ("do_not_honor", "do_not_try_again")
        clock.advance(timedelta(days=30))
    assert gateway.successful_charges() == []


def test_an_expired_card_succeeds_once_updated(
    gateway: SimulatedGateway, clock: VirtualClock, request_for: MakeRequest
) -> None:
    gateway.add_card("card_exp", Scenario.expired())
    assert gateway.charge(request_for("k1", card="card_exp")).decline_code == "expired_card"
    clock.advance(timedelta(days=40))
    assert gateway.charge(request_for("k2", card="card_exp")).decline_code == "expired_card"
    assert gateway.update_card("card_exp") == clock.now()
    assert gateway.charge(request_for("k3", card="card_exp")).status is ChargeStatus.SUCCEEDED


def test_updating_an_unknown_card_is_not_found(gateway: SimulatedGateway) -> None:
    with pytest.raises(NotFound, match="card_typo"):
        gateway.update_card("card_typo")


def test_the_clearing_duration_counts_from_the_cards_first_try(
    gateway: SimulatedGateway, clock: VirtualClock, request_for: MakeRequest
) -> None:
    gateway.add_card("card_nsf", Scenario.soft(clears_after=timedelta(days=3)))
    clock.advance(timedelta(days=10))  # the card sat unused: the 3 days start at its first try
    assert gateway.charge(request_for("k1", card="card_nsf")).status is not ChargeStatus.SUCCEEDED


# Idempotency.


def test_the_same_key_returns_the_first_charge_and_charges_nothing(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    first = gateway.charge(request_for())
    assert gateway.charge(request_for()) == first
    assert gateway.find_charge("charge:inv_1:1") == first
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}
    assert len(gateway.successful_charges()) == 1
    stats = gateway.stats()
    assert (stats.calls, stats.deliveries, stats.replays) == (2, 2, 1)


def test_a_repeated_key_replays_a_decline_even_after_the_card_cleared(
    gateway: SimulatedGateway, clock: VirtualClock, request_for: MakeRequest
) -> None:
    gateway.add_card("card_nsf", Scenario.soft(clears_after=timedelta(hours=1)))
    declined = gateway.charge(request_for(card="card_nsf"))
    clock.advance(timedelta(hours=2))
    assert gateway.charge(request_for(card="card_nsf")) == declined  # a new try needs a new key


@pytest.mark.parametrize(
    "changed",
    [{"amount": 2000}, {"currency": "eur"}, {"invoice_id": "inv_2"}],
)
def test_the_same_key_with_other_terms_is_refused_naming_the_key(
    gateway: SimulatedGateway, request_for: MakeRequest, changed: dict[str, object]
) -> None:
    gateway.charge(request_for())
    with pytest.raises(IdempotencyKeyMismatch, match="charge:inv_1:1") as caught:
        gateway.charge(request_for(**changed))
    assert isinstance(caught.value, InvalidInput)  # the CLI and API edges treat it as bad input
    assert caught.value.http_status == 422
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}


def test_the_currencys_case_is_not_a_different_charge(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    first = gateway.charge(request_for(currency="usd"))
    assert gateway.charge(request_for(currency="USD")) == first


def test_concurrent_deliveries_of_one_key_charge_once(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    barrier = threading.Barrier(8)
    results = []

    def deliver() -> None:
        barrier.wait()
        results.append(gateway.charge(request_for()))

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(results) == 8 and len(set(results)) == 1
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}


# Faults.


def test_a_timeout_before_the_charge_charges_nothing(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_BEFORE, times=1))
    with pytest.raises(ProviderTimeout, match="look the key up"):
        gateway.charge(request_for())
    assert gateway.find_charge("charge:inv_1:1") is None
    assert gateway.charge(request_for()).status is ChargeStatus.SUCCEEDED  # the fault is spent
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}


def test_a_timeout_after_the_charge_leaves_it_made_and_findable(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    with pytest.raises(ProviderTimeout):
        gateway.charge(request_for())
    found = gateway.find_charge("charge:inv_1:1")
    assert found is not None and found.status is ChargeStatus.SUCCEEDED
    assert gateway.charge(request_for()) == found  # the caller's retry with the same key
    assert gateway.total_charged("inv_1") == 1999
    assert gateway.stats().timeouts == 1


def test_a_duplicate_delivery_charges_once(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    gateway.inject(Fault(kind=FaultKind.DUPLICATE))
    charge = gateway.charge(request_for())
    assert charge.status is ChargeStatus.SUCCEEDED
    stats = gateway.stats()
    assert (stats.calls, stats.deliveries, stats.replays) == (1, 2, 1)
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}
    assert gateway.double_charged_invoices() == []


def test_a_slow_answer_sleeps_outside_the_lock_with_the_injected_sleep(
    clock: VirtualClock, request_for: MakeRequest
) -> None:
    gateway: SimulatedGateway

    def sleep(seconds: float) -> None:
        # Another call goes through while this one is held: the lock is not held.
        slept.append(seconds)
        assert gateway.find_charge("charge:inv_1:1") is not None

    slept: list[float] = []
    gateway = SimulatedGateway(clock, sleep=sleep)
    gateway.inject(Fault(kind=FaultKind.SLOW, delay_seconds=2.5, times=1))
    assert gateway.charge(request_for()).status is ChargeStatus.SUCCEEDED
    assert slept == [2.5]


def test_a_timeout_can_take_its_time(
    gateway: SimulatedGateway, sleep: RecordedSleep, request_for: MakeRequest
) -> None:
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_BEFORE, times=1, delay_seconds=30))
    with pytest.raises(ProviderTimeout):
        gateway.charge(request_for())
    assert sleep.delays == [30]


def test_an_outage_refuses_charges_and_lookups_inside_its_window_only(
    gateway: SimulatedGateway, clock: VirtualClock, request_for: MakeRequest
) -> None:
    gateway.charge(request_for("k_before"))
    gateway.inject(Fault.outage(START + timedelta(hours=1), START + timedelta(hours=2)))
    assert gateway.charge(request_for("k0")).status is ChargeStatus.SUCCEEDED
    clock.advance(timedelta(hours=1))
    with pytest.raises(ProviderUnavailable, match="outage"):
        gateway.charge(request_for("k1"))
    with pytest.raises(ProviderUnavailable):
        gateway.find_charge("k_before")
    clock.advance(timedelta(hours=1))  # the window is [start, end)
    assert gateway.find_charge("k1") is None  # refused calls charge nothing
    assert gateway.charge(request_for("k1")).status is ChargeStatus.SUCCEEDED
    assert gateway.stats().refused == 1


def test_an_outage_is_judged_at_the_requests_instant(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    gateway.inject(Fault.outage(START + timedelta(days=1), START + timedelta(days=2)))
    with pytest.raises(ProviderUnavailable):
        gateway.charge(request_for(at=START + timedelta(days=1, hours=5)))
    assert gateway.find_charge("charge:inv_1:1") is None  # the clock is outside the window


def test_maintenance_windows_hit_only_their_gateway_or_merchant(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    window = (START - timedelta(hours=1), START + timedelta(hours=1))
    gateway.inject(Fault.maintenance(*window, gateway="stripe"))
    gateway.inject(Fault.maintenance(*window, merchant_id="acct_9"))
    with pytest.raises(ProviderUnavailable, match="maintenance of gateway 'stripe'"):
        gateway.charge(request_for("k1", gateway="stripe", merchant_id="acct_1"))
    with pytest.raises(ProviderUnavailable, match="merchant 'acct_9'"):
        gateway.charge(request_for("k2", gateway="adyen", merchant_id="acct_9"))
    ok = gateway.charge(request_for("k3", gateway="adyen", merchant_id="acct_1"))
    assert ok.status is ChargeStatus.SUCCEEDED
    assert gateway.find_charge("k3") == ok  # maintenance of one gateway is not an outage
    after = START + timedelta(hours=1)
    assert gateway.charge(request_for("k4", gateway="stripe", at=after)).status.value == "succeeded"


def test_a_maintenance_window_names_what_it_closes() -> None:
    with pytest.raises(InvalidInput, match="gateway"):
        Fault.maintenance(START, START + timedelta(hours=1))


def test_faults_scoped_to_a_key_or_invoice_hit_only_those(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_BEFORE, idempotency_key="k_doomed"))
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, invoice_id="inv_slow"))
    with pytest.raises(ProviderTimeout):
        gateway.charge(request_for("k_doomed"))
    with pytest.raises(ProviderTimeout):
        gateway.charge(request_for("k_doomed"))  # unlimited: every matching call
    assert gateway.charge(request_for("k_other")).status is ChargeStatus.SUCCEEDED
    with pytest.raises(ProviderTimeout):
        gateway.charge(request_for("k_slow", invoice_id="inv_slow"))
    assert gateway.find_charge("k_slow") is not None
    assert gateway.stats().faults_fired == {"timeout_after": 1, "timeout_before": 2}


def test_a_fault_for_the_next_n_calls_is_spent_after_n(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    fault_id = gateway.inject(Fault(kind=FaultKind.TIMEOUT_BEFORE, times=2))
    assert [f.remaining for f in gateway.faults()] == [2]
    for key in ("k1", "k2"):
        with pytest.raises(ProviderTimeout):
            gateway.charge(request_for(key))
    assert gateway.faults() == []
    assert gateway.charge(request_for("k3")).status is ChargeStatus.SUCCEEDED
    with pytest.raises(NotFound, match=fault_id):
        gateway.remove_fault(fault_id)


def test_an_unavailable_call_does_not_spend_other_faults(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    gateway.inject(Fault(kind=FaultKind.UNAVAILABLE, times=1))
    gateway.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    with pytest.raises(ProviderUnavailable):
        gateway.charge(request_for())
    assert [f.fault.kind for f in gateway.faults()] == [FaultKind.TIMEOUT_AFTER]


def test_faults_can_be_removed_and_cleared(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    first = gateway.inject(Fault(kind=FaultKind.TIMEOUT_BEFORE))
    gateway.inject(Fault(kind=FaultKind.DUPLICATE))
    gateway.remove_fault(first)
    assert [f.fault.kind for f in gateway.faults()] == [FaultKind.DUPLICATE]
    gateway.clear_faults()
    assert gateway.faults() == []


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"kind": FaultKind.SLOW}, "delay_seconds"),
        ({"kind": FaultKind.SLOW, "delay_seconds": float("inf")}, "delay_seconds"),
        ({"kind": FaultKind.DUPLICATE, "times": 0}, "times"),
        ({"kind": FaultKind.DUPLICATE, "invoice_id": ""}, "invoice_id"),
        ({"kind": FaultKind.UNAVAILABLE, "start": START.replace(tzinfo=None)}, "start"),
        ({"kind": FaultKind.UNAVAILABLE, "start": START, "end": START}, "end"),
    ],
)
def test_a_fault_refuses_bad_fields_by_name(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Fault(**fields)  # type: ignore[arg-type]
    assert caught.value.field == field


# Counts.


def test_double_charges_under_different_keys_are_reported(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    # A caller that forgot to reconcile: two keys for one invoice both succeed.
    gateway.charge(request_for("charge:inv_1:1"))
    gateway.charge(request_for("charge:inv_1:2"))
    gateway.charge(request_for("charge:inv_2:1", invoice_id="inv_2"))
    assert gateway.double_charged_invoices() == ["inv_1"]
    assert gateway.total_charged("inv_1") == 2 * 1999
    assert [c.idempotency_key for c in gateway.charges_for_invoice("inv_1")] == [
        "charge:inv_1:1",
        "charge:inv_1:2",
    ]
    assert gateway.stats().double_charged_invoices == ["inv_1"]


def test_declines_count_as_keys_that_moved_no_money(
    gateway: SimulatedGateway, request_for: MakeRequest
) -> None:
    gateway.add_card("card_lost", Scenario.hard("lost_card"))
    gateway.charge(request_for("k1", card="card_lost"))
    assert gateway.charges_per_key() == {"k1": 0}
    assert gateway.total_charged("inv_1") == 0
    assert len(gateway.charges_for_invoice("inv_1")) == 1
    stats = gateway.stats()
    assert (stats.succeeded, stats.declined) == (0, 1)


def test_charge_ids_depend_on_the_seed_and_key_only(request_for: MakeRequest) -> None:
    def charge_id(seed: int, *keys: str) -> str:
        gateway = SimulatedGateway(VirtualClock(START), seed=seed)
        for key in keys:
            last = gateway.charge(request_for(key, invoice_id=key))
        return last.id

    assert charge_id(1, "a", "b") == charge_id(1, "b")
    assert charge_id(1, "b") != charge_id(2, "b")
