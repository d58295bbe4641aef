"""The customers' side of a chaos run, through the real edges: each renewal is created and
charged by the billing app (declined, as the demo population says), then reported to
Recoup with `POST /v1/dunning/failures`; some invoices are paid another way a moment later
(the billing app closes them, then `POST /v1/dunning/invoices/{id}/paid`).

Requests that meet the chaos (a 5xx while the gateway is down or Recoup's connections are
being terminated, a 409 while an idempotency key is in flight, a refused connection) are sent
again, with the same Idempotency-Key, until `REQUEST_DEADLINE`.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from recoup.demo.population import Customer
from recoup.timekeeping.instants import format_utc

REQUEST_DEADLINE = 60.0  # seconds one request may keep meeting the chaos before it is an error
# An Idempotency-Key whose request died with its database connection stays locked until the
# API's lock timeout (60 s). Both operations used here are idempotent by themselves (the same
# failure reported again answers the invoice; paying a paid invoice changes nothing), so after
# this long a client may send the request again under a new key, and this one does.
STUCK_KEY_SECONDS = 5.0
_AGAIN = frozenset({409, 429, 500, 502, 503, 504})


class GaveUp(Exception):
    """A request met the chaos for longer than `REQUEST_DEADLINE`."""


@dataclass
class LoadResult:
    counts: Counter[str] = field(default_factory=Counter)
    reported: set[str] = field(default_factory=set)  # invoices in dunning
    paid_out_of_band: set[str] = field(default_factory=set)  # closed another way while open
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, what: str, invoice_id: str | None = None, into: set[str] | None = None) -> None:
        with self.lock:
            self.counts[what] += 1
            if into is not None and invoice_id is not None:
                into.add(invoice_id)


class CustomerLoad:
    """Sends the customers' events over `spread` seconds with `concurrency` threads."""

    def __init__(
        self,
        customers: Sequence[Customer],
        *,
        api_url: str,
        token: str,
        billing_url: str,
        spread: float,
        seed: int,
        concurrency: int = 8,
    ) -> None:
        self.customers = customers
        self.api_url, self.billing_url = api_url, billing_url
        self.spread = spread
        self.rng = random.Random(seed)
        self.result = LoadResult()
        self._http = httpx.Client(
            timeout=30.0,
            headers={"Authorization": f"Bearer {token}"},
            limits=httpx.Limits(max_connections=concurrency * 2),
        )
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="customers")
        self._thread = threading.Thread(target=self._dispatch, name="customers", daemon=True)
        self._stop = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def join(self) -> LoadResult:
        """Wait until every event was sent (or gave up)."""
        self._thread.join()
        self._pool.shutdown(wait=True)
        self._http.close()
        return self.result

    def abort(self) -> None:
        self._stop.set()
        self._thread.join()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._http.close()

    def timeline(self) -> list[tuple[float, str, Customer]]:
        """(seconds from the start, renewal | paid, customer), in order: renewals evenly over
        `spread`, each payment another way 0.2–2 s after its renewal."""
        events: list[tuple[float, str, Customer]] = []
        n = len(self.customers)
        for i, c in enumerate(self.customers):
            at = self.spread * i / max(1, n)
            events.append((at, "renewal", c))
            if c.paid_out_of_band_at is not None:
                events.append((at + self.rng.uniform(0.2, 2.0), "paid", c))
        return sorted(events, key=lambda e: e[0])

    def _dispatch(self) -> None:
        began = time.monotonic()
        renewals: dict[str, Future[bool]] = {}
        for at, kind, customer in self.timeline():
            if self._stop.wait(max(0.0, began + at - time.monotonic())):
                return
            if kind == "renewal":
                renewals[customer.invoice_id] = self._pool.submit(
                    self._guarded, self._renewal, customer
                )
            else:
                renewal = renewals[customer.invoice_id]
                self._pool.submit(self._guarded, self._paid, customer, renewal)

    def _guarded(self, fn: Any, *args: Any) -> bool:
        try:
            return bool(fn(*args))
        except Exception as exc:
            with self.result.lock:
                self.result.errors.append(f"{fn.__name__} {args[0].invoice_id}: {exc}")
            return False

    def _send(
        self, method: str, url: str, *, key: str | None = None, **kwargs: Any
    ) -> httpx.Response:
        """The request, sent again while it meets the chaos; under `key` (Idempotency-Key),
        replaced by `{key}~n` when a request holding it died and left it locked."""
        began = time.monotonic()
        deadline = began + REQUEST_DEADLINE
        in_use_since: float | None = None
        rekeyed = 0
        while True:
            headers = (
                {} if key is None else {"Idempotency-Key": key + (f"~{rekeyed}" if rekeyed else "")}
            )
            try:
                answer = self._http.request(method, url, headers=headers, **kwargs)
                if answer.status_code not in _AGAIN:
                    answer.raise_for_status()
                    return answer
                problem = f"HTTP {answer.status_code}: {answer.text[:200]}"
                if answer.status_code == 409 and "idempotency-key-in-use" in answer.text:
                    in_use_since = in_use_since or time.monotonic()
                    if time.monotonic() - in_use_since > STUCK_KEY_SECONDS:
                        rekeyed += 1
                        in_use_since = None
                        self.result.note("idempotency key left locked: sent again under a new one")
                else:
                    in_use_since = None
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                raise GaveUp(f"{method} {url}: {problem}")
            time.sleep(0.2)

    def _renewal(self, c: Customer) -> bool:
        """The renewal's charge at the billing app; its decline reported to Recoup."""
        body = self._send(
            "POST",
            f"{self.billing_url}/invoices",
            json={
                "id": c.invoice_id,
                "customer_id": c.customer_id,
                "amount": c.amount,
                "currency": c.currency,
                "card_fingerprint": c.card,
                "charge_at": format_utc(c.failed_at),
            },
        ).json()
        charge = body["charge"]
        if body["status"] == "paid" or charge is None:
            self.result.note("renewal paid at once")
            return False
        answer = self._send(
            "POST",
            f"{self.api_url}/v1/dunning/failures",
            key=f"failure:{c.invoice_id}",
            json={
                "invoice_id": c.invoice_id,
                "customer_id": c.customer_id,
                "amount": c.amount,
                "currency": c.currency,
                "failed_at": format_utc(c.failed_at),
                "timezone": c.timezone,
                "country": c.country,
                "decline_code": charge["decline_code"],
                "advice_code": charge["advice_code"],
                "card": {"fingerprint": c.card, "network": c.network},
                "gateway": c.gateway,
                "merchant_id": c.merchant_id,
            },
        )
        self.result.note(
            f"failure reported ({answer.status_code})", c.invoice_id, self.result.reported
        )
        return True

    def _paid(self, c: Customer, renewal: Future[bool]) -> bool:
        """Paid another way: closed at the billing app first, then Recoup is told."""
        if not renewal.result():
            return False
        closed = self._send("POST", f"{self.billing_url}/invoices/{c.invoice_id}/paid").json()
        if not closed["changed"]:
            self.result.note("paid already")
            return False
        self._send(
            "POST",
            f"{self.api_url}/v1/dunning/invoices/{c.invoice_id}/paid",
            key=f"paid:{c.invoice_id}",
        )
        self.result.note("paid out of band", c.invoice_id, self.result.paid_out_of_band)
        return True


__all__ = ["CustomerLoad", "GaveUp", "LoadResult"]
