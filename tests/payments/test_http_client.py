"""`GatewayClient`: the provider protocol over HTTP, in-process and over real loopback sockets."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import httpx
import pytest

from recoup.errors import InvalidInput, NotFound
from recoup.payments import (
    ChargeStatus,
    Fault,
    FaultKind,
    GatewayClient,
    IdempotencyKeyMismatch,
    PaymentProvider,
    ProviderTimeout,
    ProviderUnavailable,
    Scenario,
    SimulatedGateway,
)
from tests.payments.conftest import (
    IN_PROCESS_URL,
    START,
    RecordedSleep,
    in_process_client,
    make_request,
)
from tests.support import free_socket


@pytest.fixture
def client(gateway: SimulatedGateway) -> Iterator[GatewayClient]:
    with in_process_client(gateway) as http, GatewayClient(IN_PROCESS_URL, http=http) as client:
        yield client


def test_it_is_a_payment_provider_that_charges_once_per_key(
    client: GatewayClient, gateway: SimulatedGateway
) -> None:
    provider: PaymentProvider = client
    charge = provider.charge(make_request())
    assert charge == gateway.find_charge("charge:inv_1:1")
    assert provider.charge(make_request()) == charge
    assert provider.find_charge("charge:inv_1:1") == charge
    assert provider.find_charge("charge:inv_1:2") is None
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}


def test_the_admin_calls_drive_the_scenarios(
    client: GatewayClient, gateway: SimulatedGateway
) -> None:
    client.add_card("card_exp", Scenario.expired())
    client.add_card("card_nsf", Scenario.soft(clears_after=timedelta(days=2), paydays=(24,)))
    assert gateway.faults() == []
    declined = client.charge(make_request("k1", card="card_exp"))
    assert (declined.status, declined.decline_code) == (
        ChargeStatus.FAILED_RETRYABLE,
        "expired_card",
    )
    assert client.update_card("card_exp", at=START + timedelta(hours=1)) == START + timedelta(
        hours=1
    )
    later = START + timedelta(hours=2)
    assert client.charge(make_request("k2", card="card_exp", at=later)).status.value == "succeeded"
    assert [c.idempotency_key for c in client.invoice_charges("inv_1")] == ["k1", "k2"]
    assert client.stats()["charges_per_key"] == {"k1": 0, "k2": 1}
    with pytest.raises(NotFound):
        client.update_card("card_missing")


def test_timeouts_unavailability_and_mismatches_keep_their_meaning(
    client: GatewayClient, gateway: SimulatedGateway, sleep: RecordedSleep
) -> None:
    client.inject(Fault(kind=FaultKind.TIMEOUT_AFTER, times=1))
    with pytest.raises(ProviderTimeout):
        client.charge(make_request())
    made = client.find_charge("charge:inv_1:1")
    assert made is not None and made.status is ChargeStatus.SUCCEEDED

    with pytest.raises(IdempotencyKeyMismatch) as caught:
        client.charge(make_request(amount=5))
    with pytest.raises(IdempotencyKeyMismatch) as direct:
        gateway.charge(make_request(amount=5))
    assert str(caught.value) == str(direct.value)  # the same error, through HTTP or not

    client.inject(Fault.outage(START, START + timedelta(minutes=5)))
    with pytest.raises(ProviderUnavailable):
        client.charge(make_request("k2", invoice_id="inv_2"))
    with pytest.raises(ProviderUnavailable):
        client.find_charge("k2")
    client.clear_faults()
    assert client.find_charge("k2") is None
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}


def test_bad_admin_input_is_invalid_input_naming_the_field(client: GatewayClient) -> None:
    with pytest.raises(InvalidInput) as caught:
        client._admin("POST", "/cards", json={"fingerprint": "c", "scenario": {"paydays": [1]}})
    assert caught.value.field == "scenario.decline_code"


Reply = Callable[[httpx.Request], httpx.Response]


def _raise(exc: type[httpx.TransportError]) -> Reply:
    def reply(request: httpx.Request) -> httpx.Response:
        raise exc("simulated", request=request)

    return reply


@pytest.mark.parametrize(
    ("reply", "on_charge"),
    [
        # Only a 503 or a request that never left promises that nothing happened.
        (lambda r: httpx.Response(503, json={"detail": "down"}), ProviderUnavailable),
        (_raise(httpx.ConnectError), ProviderUnavailable),
        (_raise(httpx.ConnectTimeout), ProviderUnavailable),
        (_raise(httpx.PoolTimeout), ProviderUnavailable),
        (lambda r: httpx.Response(504, json={"detail": "slow"}), ProviderTimeout),
        (lambda r: httpx.Response(500, text="boom"), ProviderTimeout),
        (lambda r: httpx.Response(502, text="bad gateway"), ProviderTimeout),
        (lambda r: httpx.Response(200, text="not json"), ProviderTimeout),
        (lambda r: httpx.Response(200, json={"id": "x"}), ProviderTimeout),
        (_raise(httpx.ReadTimeout), ProviderTimeout),
        (_raise(httpx.WriteTimeout), ProviderTimeout),
        (_raise(httpx.RemoteProtocolError), ProviderTimeout),
        (_raise(httpx.ReadError), ProviderTimeout),
    ],
)
def test_transport_failures_map_to_what_is_known_about_the_money(
    reply: Reply, on_charge: type[Exception]
) -> None:
    http = httpx.Client(transport=httpx.MockTransport(reply))
    with GatewayClient(IN_PROCESS_URL, http=http) as client:
        with pytest.raises(on_charge):
            client.charge(make_request())
        # A lookup moves no money: whatever goes wrong, it just could not answer.
        with pytest.raises(ProviderUnavailable):
            client.find_charge("charge:inv_1:1")
    http.close()


def test_the_client_refuses_a_bad_base_url_or_timeout() -> None:
    with pytest.raises(InvalidInput, match="base_url"):
        GatewayClient("127.0.0.1:8090")
    with pytest.raises(InvalidInput, match="timeout"):
        GatewayClient(timeout=0)


# Real sockets.


def test_a_client_side_timeout_is_a_provider_timeout_and_the_key_finds_the_charge(
    served: tuple[SimulatedGateway, str],
) -> None:
    gateway, url = served
    # The gateway charges, then holds its answer longer than the client waits.
    gateway.inject(Fault(kind=FaultKind.SLOW, delay_seconds=0.5, times=1))
    with GatewayClient(url, timeout=0.1) as client:
        with pytest.raises(ProviderTimeout, match="look the key up"):
            client.charge(make_request())
        found = client.find_charge("charge:inv_1:1")
        assert found is not None and found.status is ChargeStatus.SUCCEEDED
        assert client.charge(make_request()) == found
    assert gateway.charges_per_key() == {"charge:inv_1:1": 1}


def test_a_refused_connection_is_unavailable() -> None:
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()  # bound, never listened on, now closed: connections are refused
    with GatewayClient(f"http://127.0.0.1:{port}", timeout=2) as client:
        with pytest.raises(ProviderUnavailable, match="unreachable"):
            client.charge(make_request())
        with pytest.raises(ProviderUnavailable):
            client.find_charge("charge:inv_1:1")
