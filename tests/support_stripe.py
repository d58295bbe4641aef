"""A Stripe to test against: `localstripe` (a stateful emulator) in a subprocess on loopback,
helpers that build its customers, cards, subscriptions and invoices with the official SDK, a
fault-injecting proxy to put between a client and it, a recording server that answers as
Stripe would for what localstripe lacks, and signed webhook events.

Use from any test package: import the fixtures into the package's conftest
(`from tests.support_stripe import localstripe, stripe_sdk  # noqa: F401`), or the context
managers (`LocalStripe`, `FaultProxy`, `RecordingStripe`, `WebhookSink`) directly.

localstripe 1.15, as seen here (see also the shared reference notes):
- it keeps its store in a pickle file of a fixed name in the system temp directory, rewritten
  on every change;
  our launcher turns that off (nothing shared between runs or xdist workers) and listens on
  127.0.0.1 only, on a port the OS picks, which it prints;
- a declined `invoices/{id}/pay` answers 200, the invoice still `open`, the failed charge
  (expanded) as its `charge`; no Request-Id header; no idempotency keys;
- a pay of a void invoice answers 400 "Bad request"; of a paid one 400 "Invoice is already
  paid"; no `mark_uncollectible`, no `pause_collection` (an update naming it answers 400);
- webhooks are sent ~1 s after the event, signed as Stripe signs them.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import http.client
import json
import re
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import pytest
import stripe

from recoup.payments.stripe_billing import StripeBilling
from tests.support import DEADLINE, STARTUP_TIMEOUT, wait_until

TEST_KEY = "sk_test_recoup_harness_0123456789"  # localstripe takes any sk_… key
GOOD_CARD = "4242424242424242"
DECLINING_CARD = "4000000000000341"  # attaches, then every charge is declined (card_declined)
AUTHENTICATING_CARD = "4000002500003155"  # every charge needs 3-D Secure (requires_action)
HOLD_LIMIT = 10.0  # seconds a hanging fault holds a connection at most (until the proxy stops)

# Run localstripe's own aiohttp app: no store on disk, loopback only, the port printed.
_LAUNCHER = """
import socket, sys
import localstripe.resources as resources
resources.Store.dump_to_disk = lambda self: None
from aiohttp import web
from localstripe.server import app
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
web.run_app(app, sock=sock, print=None, access_log=None, handle_signals=True)
"""


class LocalStripe:
    """localstripe in a subprocess: `url` once started, `client` an SDK client pointed at it."""

    def __init__(self) -> None:
        self.url = ""
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> LocalStripe:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline().strip()
        if not line.isdigit():
            self.__exit__()
            raise RuntimeError("localstripe did not start (is it installed? pip install .[dev])")
        self.url = f"http://127.0.0.1:{line}"
        if not wait_until(self._answers, STARTUP_TIMEOUT, interval=0.02):
            self.__exit__()
            raise RuntimeError(f"localstripe at {self.url} did not answer")
        self.client = sdk_client(self.url)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(STARTUP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(STARTUP_TIMEOUT)
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._process = None

    def _answers(self) -> bool:
        try:
            return httpx.get(f"{self.url}/v1/customers", auth=(TEST_KEY, "")).status_code == 200
        except httpx.TransportError:
            return False


def sdk_client(url: str, *, timeout: float = 10.0) -> stripe.StripeClient:
    """The official SDK pointed at `url`, without retries of its own."""
    return stripe.StripeClient(
        TEST_KEY,
        base_addresses={"api": url},
        max_network_retries=0,
        http_client=stripe.RequestsClient(timeout=timeout),
    )


@pytest.fixture(scope="module")
def localstripe() -> Iterator[LocalStripe]:
    """localstripe, started once per test module."""
    with LocalStripe() as server:
        yield server


@pytest.fixture
def stripe_sdk(localstripe: LocalStripe) -> stripe.StripeClient:
    return localstripe.client


# Building Stripe objects at localstripe with the SDK


def card_method(client: stripe.StripeClient, number: str) -> str:
    """A card payment method of Stripe's test `number`; its id."""
    method = client.v1.payment_methods.create(
        {
            "type": "card",
            "card": {"number": number, "exp_month": 12, "exp_year": 2034, "cvc": "123"},
        }
    )
    return method.id


def customer_with_card(
    client: stripe.StripeClient,
    number: str = GOOD_CARD,
    *,
    metadata: Mapping[str, str] | None = None,
    country: str | None = None,
) -> str:
    """A customer whose default payment method is a card of `number`; the customer's id."""
    params: dict[str, Any] = {"email": "payer@example.com", "metadata": dict(metadata or {})}
    if country is not None:
        params["address"] = {"country": country, "line1": "1 Test Street"}
    customer = client.v1.customers.create(params)  # type: ignore[arg-type]
    replace_card(client, customer.id, number)
    return customer.id


def replace_card(client: stripe.StripeClient, customer_id: str, number: str) -> str:
    """Attach a new card of `number` and make it the customer's default; its id."""
    method_id = card_method(client, number)
    client.v1.payment_methods.attach(method_id, {"customer": customer_id})
    client.v1.customers.update(
        customer_id, {"invoice_settings": {"default_payment_method": method_id}}
    )
    return method_id


@dataclass(frozen=True)
class Subscribed:
    customer_id: str
    subscription_id: str
    invoice_id: str  # the subscription's first invoice


def subscription(
    client: stripe.StripeClient,
    customer_id: str,
    *,
    amount: int = 1999,
    currency: str = "usd",
    metadata: Mapping[str, str] | None = None,
) -> Subscribed:
    """A monthly plan of `amount` and a subscription of the customer to it; its first invoice
    is paid (good card) or `open` with a failed charge (declining card)."""
    product = client.v1.products.create({"name": "Recoup test plan"})
    plan = client.v1.plans.create(
        {"product": product.id, "amount": amount, "currency": currency, "interval": "month"}
    )
    sub = client.v1.subscriptions.create(
        {"customer": customer_id, "items": [{"plan": plan.id}], "metadata": dict(metadata or {})}
    )
    invoice = sub.latest_invoice
    assert isinstance(invoice, str), invoice
    return Subscribed(customer_id, sub.id, invoice)


def failed_subscription(client: stripe.StripeClient, **fields: Any) -> Subscribed:
    """A customer with the declining card and a subscription whose first invoice is `open`
    after a decline (the subscription `incomplete`)."""
    customer_metadata = fields.pop("customer_metadata", None)
    country = fields.pop("country", None)
    customer = customer_with_card(
        client, DECLINING_CARD, metadata=customer_metadata, country=country
    )
    return subscription(client, customer, **fields)


def draft_invoice(client: stripe.StripeClient, subscribed: Subscribed) -> str:
    """A new invoice of the subscription's next period, not yet charged (`draft`: a pay
    finalizes and charges it); its id. localstripe makes invoices of subscriptions only."""
    invoice = client.v1.invoices.create(
        {"customer": subscribed.customer_id, "subscription": subscribed.subscription_id}
    )
    return invoice.id


def succeeded_charges(client: stripe.StripeClient, customer_id: str) -> int:
    """How many of the customer's charges succeeded, as localstripe counts them."""
    charges = client.v1.charges.list({"customer": customer_id, "limit": 100})
    return sum(1 for charge in charges.data if charge.status == "succeeded")


# A fault-injecting proxy


class FaultKind(StrEnum):
    DROP_AFTER = "drop_after"  # forward, then close without an answer (it happened)
    HANG_AFTER = "hang_after"  # forward, then answer nothing until the client gives up
    HANG_BEFORE = "hang_before"  # answer nothing, forward nothing (nothing happened)
    STATUS = "status"  # answer `status` with a Stripe error, forward nothing


@dataclass
class ProxyFault:
    kind: FaultKind
    path: str  # a regular expression the request's path must match in full
    method: str = "POST"
    times: int = 1  # how many matching requests it hits
    status: int = 500

    def matches(self, method: str, path: str) -> bool:
        return (
            self.times > 0 and method == self.method and re.fullmatch(self.path, path) is not None
        )


@dataclass(frozen=True)
class Proxied:
    method: str
    path: str  # without the query
    fault: FaultKind | None
    forwarded: bool


class FaultProxy:
    """An HTTP proxy on loopback in front of `upstream` that injects faults, per method, path
    (a regular expression) and count: `inject(FaultKind.HANG_AFTER, r"/v1/invoices/\\w+/pay")`.
    `requests` lists what it saw. A hanging fault holds its connection until the client gives
    up or the proxy stops (at most `HOLD_LIMIT` seconds)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.faults: list[ProxyFault] = []
        self.requests: list[Proxied] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _proxy_handler(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def inject(
        self,
        kind: FaultKind,
        path: str,
        *,
        method: str = "POST",
        times: int = 1,
        status: int = 500,
    ) -> ProxyFault:
        fault = ProxyFault(kind, path, method, times, status)
        with self._lock:
            self.faults.append(fault)
        return fault

    def forwarded(self, path: str, method: str = "POST") -> int:
        """How many requests matching `path` (a regular expression) reached the upstream."""
        return sum(
            1
            for r in self.requests
            if r.forwarded and r.method == method and re.fullmatch(path, r.path)
        )

    def _take(self, method: str, path: str) -> ProxyFault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.times -= 1
                    return fault
        return None

    def __enter__(self) -> FaultProxy:
        _serve(self._server)
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


def _serve(server: ThreadingHTTPServer) -> None:
    """Serve in a daemon thread; polling for shutdown every 20 ms keeps teardowns short."""
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    ).start()


def _proxy_handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = urlsplit(self.path).path
            fault = proxy._take(self.command, path)
            kind = fault.kind if fault else None
            if kind is FaultKind.HANG_BEFORE:
                proxy.requests.append(Proxied(self.command, path, kind, False))
                self._hang()
                return
            if fault is not None and kind is FaultKind.STATUS:
                proxy.requests.append(Proxied(self.command, path, kind, False))
                error = {"error": {"type": "api_error", "message": f"injected {fault.status}"}}
                self._answer(fault.status, json.dumps(error).encode(), {})
                return
            status, headers, answer = self._forward(body)
            proxy.requests.append(Proxied(self.command, path, kind, True))
            if kind is FaultKind.DROP_AFTER:
                self.close_connection = True
                return
            if kind is FaultKind.HANG_AFTER:
                self._hang()
                return
            self._answer(status, answer, headers)

        do_GET = do_POST = do_DELETE = _handle

        def _forward(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
            upstream = http.client.HTTPConnection(
                proxy.upstream.hostname or "127.0.0.1", proxy.upstream.port, timeout=DEADLINE
            )
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                upstream.request(self.command, self.path, body=body or None, headers=headers)
                response = upstream.getresponse()
                kept = {
                    k: v
                    for k, v in response.getheaders()
                    if k.lower() in ("content-type", "request-id", "idempotency-key")
                }
                return response.status, kept, response.read()
            finally:
                upstream.close()

        def _hang(self) -> None:
            proxy._release.wait(HOLD_LIMIT)
            self.close_connection = True

        def _answer(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if not any(k.lower() == "content-type" for k in headers):
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


# A recording server: Stripe's answers, scripted, for what localstripe lacks


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    form: list[tuple[str, str]]  # the form body, in order, blanks kept
    query: list[tuple[str, str]]
    idempotency_key: str | None
    authorization: str | None


@dataclass
class _Script:
    answers: list[tuple[int, Any, dict[str, str]]] = field(default_factory=list)

    def next(self) -> tuple[int, Any, dict[str, str]]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class RecordingStripe:
    """A loopback server that records every request (method, path, form body,
    Idempotency-Key) and answers from a script: `on("POST", "/v1/invoices/in_1/pay", (402,
    error_body))`; answers are given in order, the last one repeated. Unscripted requests
    get Stripe's 404 `resource_missing`."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._scripts: dict[tuple[str, str], _Script] = {}
        self._server = _Server(("127.0.0.1", 0), _recording_handler(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def on(self, method: str, path: str, *answers: tuple[int, Any]) -> None:
        self._scripts[(method, path)] = _Script(
            [
                (status, body, {"Request-Id": f"req_{secrets.token_hex(6)}"})
                for status, body in answers
            ]
        )

    def sent(self, method: str | None = None, path: str | None = None) -> list[Recorded]:
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and (path is None or r.path == path)
        ]

    def __enter__(self) -> RecordingStripe:
        _serve(self._server)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _recording_handler(server: RecordingStripe) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            url = urlsplit(self.path)
            server.requests.append(
                Recorded(
                    method=self.command,
                    path=url.path,
                    form=parse_qsl(body, keep_blank_values=True),
                    query=parse_qsl(url.query, keep_blank_values=True),
                    idempotency_key=self.headers.get("Idempotency-Key"),
                    authorization=self.headers.get("Authorization"),
                )
            )
            script = server._scripts.get((self.command, url.path))
            if script is None:
                status, answer, headers = 404, missing(url.path), {}
            else:
                status, answer, headers = script.next()
            data = json.dumps(answer).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _handle

    return Handler


def missing(path: str) -> dict[str, Any]:
    """Stripe's answer to an object that does not exist."""
    return {
        "error": {
            "type": "invalid_request_error",
            "code": "resource_missing",
            "message": f"No such object: {path.rsplit('/', 1)[-1]!r}",
        }
    }


def stripe_invoice(invoice_id: str = "in_1", status: str = "open", **fields: Any) -> dict[str, Any]:
    """An invoice as Stripe answers it (API version basil: payments apart, `parent`)."""
    return {
        "id": invoice_id,
        "object": "invoice",
        "status": status,
        "customer": "cus_1",
        "currency": "usd",
        "amount_due": 1999,
        "amount_paid": 1999 if status == "paid" else 0,
        "amount_remaining": 0 if status == "paid" else 1999,
        "livemode": False,
        "hosted_invoice_url": f"https://invoice.stripe.com/i/acct_1/{invoice_id}",
        "metadata": {},
        **fields,
    }


def stripe_subscription(
    subscription_id: str = "sub_1", status: str = "past_due", **fields: Any
) -> dict[str, Any]:
    return {
        "id": subscription_id,
        "object": "subscription",
        "status": status,
        "customer": "cus_1",
        "pause_collection": None,
        "metadata": {},
        **fields,
    }


# Webhooks


def register_webhook(
    localstripe_url: str,
    endpoint_id: str,
    url: str,
    secret: str,
    events: list[str] | None = None,
) -> None:
    """Register a webhook endpoint at localstripe (`POST /_config/webhooks/{id}`)."""
    form: list[tuple[str, str]] = [("url", url), ("secret", secret)]
    form += [(f"events[{i}]", event) for i, event in enumerate(events or [])]
    httpx.post(
        f"{localstripe_url}/_config/webhooks/{endpoint_id}",
        content=urlencode(form),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    ).raise_for_status()


def stripe_signature(payload: bytes, secret: str, *, timestamp: int | None = None) -> str:
    """The `Stripe-Signature` header of `payload`: `t=…,v1=…`, the HMAC-SHA256 of
    `"{t}.{payload}"` with the endpoint's secret."""
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), b"%d.%s" % (t, payload), hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def signed_event(
    event_type: str,
    obj: Mapping[str, Any],
    secret: str,
    *,
    event_id: str | None = None,
    created: int | None = None,
    idempotency_key: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """A Stripe event of `event_type` around `obj` (for events localstripe does not send,
    such as `invoice.payment_failed`), and the headers that deliver it signed."""
    created = int(time.time()) if created is None else created
    event = {
        "id": event_id or f"evt_{secrets.token_hex(8)}",
        "object": "event",
        "type": event_type,
        "created": created,
        "livemode": False,
        "api_version": stripe.api_version,
        "data": {"object": dict(obj)},
        "request": {"id": None, "idempotency_key": idempotency_key},
    }
    payload = json.dumps(event).encode()
    headers = {
        "Content-Type": "application/json",
        "Stripe-Signature": stripe_signature(payload, secret, timestamp=created),
    }
    return payload, headers


@dataclass(frozen=True)
class Delivery:
    payload: bytes
    signature: str | None

    @property
    def event(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.payload)
        return found


class WebhookSink:
    """A loopback endpoint that keeps what is posted to it (`deliveries`); `wait_for(type)`
    polls with a deadline for an event of that type."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self._server = _Server(("127.0.0.1", 0), _sink_handler(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/webhook"

    def wait_for(
        self,
        event_type: str,
        object_id: str | None = None,
        timeout: float = DEADLINE,
    ) -> Delivery:
        """The first delivery of an event of `event_type` (about `object_id`, if given)."""

        def found() -> Delivery | None:
            for delivery in list(self.deliveries):
                event = delivery.event
                about = event.get("data", {}).get("object", {}).get("id")
                if event.get("type") == event_type and object_id in (None, about):
                    return delivery
            return None

        wait_until(lambda: found() is not None, timeout, interval=0.05)
        delivery = found()
        if delivery is None:
            raise AssertionError(f"no {event_type} event of {object_id} within {timeout} s")
        return delivery

    def __enter__(self) -> WebhookSink:
        _serve(self._server)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _sink_handler(sink: WebhookSink) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            payload = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            sink.deliveries.append(Delivery(payload, self.headers.get("Stripe-Signature")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


@contextlib.contextmanager
def billing_through(url: str, *, timeout: float = 10.0) -> Iterator[StripeBilling]:
    """A `StripeBilling` pointed at `url`, closed at the end."""
    with StripeBilling(TEST_KEY, api_base=url, timeout=timeout) as billing:
        yield billing
