"""`GatewayClient`: the `PaymentProvider` protocol over HTTP, against `recoup gateway` (or any
server speaking `recoup.payments.server`'s JSON), with the admin calls tests and demos use.

Failures map onto the protocol by what the caller can know about the money:

    504, a read or write timeout, a dropped connection,   → ProviderTimeout: the request may
    a 5xx other than 503, an unreadable 200                 have been processed; look it up
    503, connection refused, a connect or pool timeout   → ProviderUnavailable: nothing was
                                                            sent, or it was refused unprocessed
    422 idempotency-key-mismatch                         → IdempotencyKeyMismatch
    400 / 422 invalid input                              → InvalidInput; 404 → NotFound

A lookup (`find_charge`) changes nothing, so any failure of one is `ProviderUnavailable`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from recoup.errors import InvalidInput, NotFound
from recoup.payments import wire
from recoup.payments.faults import Fault
from recoup.payments.provider import (
    Charge,
    ChargeRequest,
    IdempotencyKeyMismatch,
    PaymentError,
    ProviderTimeout,
    ProviderUnavailable,
)
from recoup.payments.scenarios import Scenario
from recoup.payments.wire import TYPE_BASE
from recoup.timekeeping.instants import format_utc, parse_instant

DEFAULT_BASE_URL = "http://127.0.0.1:8090"
DEFAULT_TIMEOUT = 10.0  # seconds, for every phase of one request

# Raised before the request left: nothing can have been processed.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


class GatewayClient:
    """A `PaymentProvider` talking to a simulated gateway at `base_url`.

    `http` replaces the client the requests go through (a `starlette.testclient.TestClient`
    serves the app in-process); requests still use absolute URLs under `base_url`.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        http: httpx.Client | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise InvalidInput("base_url", base_url, "expected an http:// or https:// URL")
        if not timeout > 0:
            raise InvalidInput("timeout", timeout, "expected a positive number of seconds")
        self._base = base_url.rstrip("/")
        self._timeout = timeout
        self._owned = http is None
        self._http = http if http is not None else httpx.Client()

    def close(self) -> None:
        if self._owned:
            self._http.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # The provider protocol.

    def charge(self, request: ChargeRequest) -> Charge:
        """Charge once per key (see the module docstring for the errors)."""
        try:
            response = self._send(
                "POST",
                "/charges",
                json=wire.charge_request_to_json(request),
                headers={"Idempotency-Key": request.idempotency_key},
            )
        except _NOT_SENT as exc:
            raise ProviderUnavailable(f"the gateway at {self._base} is unreachable: {exc}") from exc
        except httpx.TransportError as exc:
            raise ProviderTimeout(
                f"no answer from the gateway for key {request.idempotency_key!r} ({exc!r}); "
                "the charge may or may not have been made: look the key up"
            ) from exc
        if response.status_code == 200:
            try:
                return wire.charge_from_json(response.json())
            except (ValueError, InvalidInput) as exc:
                raise ProviderTimeout(f"unreadable answer to a charge: {exc}") from exc
        if response.status_code >= 500 and response.status_code != 503:
            # Only a 503 promises that nothing happened; any other server error may follow the
            # charge.
            raise ProviderTimeout(
                f"the gateway answered {response.status_code} for key "
                f"{request.idempotency_key!r}: {_detail(response)}"
            )
        raise self._error(response)

    def find_charge(self, idempotency_key: str) -> Charge | None:
        """The key's charge, or None; `ProviderUnavailable` when the gateway cannot answer."""
        try:
            response = self._send("GET", f"/charges/{quote(idempotency_key, safe='')}")
        except httpx.TransportError as exc:
            raise ProviderUnavailable(f"the gateway at {self._base} did not answer: {exc}") from exc
        if response.status_code == 404:
            return None
        if response.status_code == 200:
            try:
                return wire.charge_from_json(response.json())
            except (ValueError, InvalidInput) as exc:
                raise ProviderUnavailable(f"unreadable answer to a lookup: {exc}") from exc
        if response.status_code >= 500:
            raise ProviderUnavailable(
                f"the gateway answered {response.status_code}: {_detail(response)}"
            )
        raise self._error(response)

    # Admin calls.

    def add_card(self, fingerprint: str, scenario: Scenario | None = None) -> None:
        body = {
            "fingerprint": fingerprint,
            "scenario": None if scenario is None else wire.scenario_to_json(scenario),
        }
        self._admin("POST", "/cards", json=body)

    def update_card(self, fingerprint: str, *, at: datetime | None = None) -> datetime:
        body = {} if at is None else {"at": format_utc(at)}
        answer = self._admin("POST", f"/cards/{quote(fingerprint, safe='')}/update", json=body)
        return parse_instant("updated_at", str(answer["updated_at"])).astimezone(UTC)

    def inject(self, fault: Fault) -> str:
        """Put `fault` in force on the server; returns its id."""
        return str(self._admin("POST", "/faults", json=wire.fault_to_json(fault))["id"])

    def clear_faults(self) -> None:
        self._admin("DELETE", "/faults")

    def stats(self) -> dict[str, Any]:
        """The server's `GET /stats` (the fields of `GatewayStats`)."""
        return self._admin("GET", "/stats")

    def invoice_charges(self, invoice_id: str) -> list[Charge]:
        answer = self._admin("GET", f"/invoices/{quote(invoice_id, safe='')}/charges")
        return [wire.charge_from_json(c) for c in answer["charges"]]

    # Internals.

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self._http.request(method, self._base + path, timeout=self._timeout, **kwargs)

    def _admin(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = self._send(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ProviderUnavailable(f"the gateway at {self._base} did not answer: {exc}") from exc
        if response.status_code == 204:
            return {}
        if response.is_success:
            answer = response.json()
            if not isinstance(answer, dict):
                raise PaymentError(f"{method} {path}: expected a JSON object, got {answer!r}")
            return answer
        raise self._error(response)

    def _error(self, response: httpx.Response) -> Exception:
        """The exception a 4xx (or unexpected) problem answer stands for."""
        problem = _problem(response)
        kind = str(problem.get("type", "")).removeprefix(TYPE_BASE)
        detail = _detail(response)
        field = str(problem.get("field", "body"))
        allowed = str(problem.get("allowed", detail))
        if response.status_code == 503:
            return ProviderUnavailable(f"the gateway at {self._base} refused: {detail}")
        if kind == "idempotency-key-mismatch":
            return IdempotencyKeyMismatch(str(problem.get("value", "")), allowed)
        if kind in ("invalid-input", "missing-idempotency-key"):
            return InvalidInput(field, problem.get("value"), allowed)
        if response.status_code == 404:
            return NotFound(detail)
        return PaymentError(f"the gateway answered {response.status_code}: {detail}")


def _problem(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _detail(response: httpx.Response) -> str:
    detail = _problem(response).get("detail")
    return str(detail) if detail is not None else response.text[:200]


__all__ = ["DEFAULT_BASE_URL", "DEFAULT_TIMEOUT", "GatewayClient"]
