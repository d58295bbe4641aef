"""The simulated gateway over HTTP: an ASGI app serving one `SimulatedGateway` as JSON.

Endpoints (bodies in `recoup.payments.wire`):

    POST   /charges                        charge; key in `Idempotency-Key` or the body
    GET    /charges/{idempotency_key}      the key's charge; 404 when there is none
    GET    /invoices/{invoice_id}/charges  the invoice's charges and the amount charged
    POST   /cards                          {"fingerprint": …, "scenario": {…} | null}
    POST   /cards/{fingerprint}/update     {"at": …} (optional): the card was updated
    POST   /faults                         inject a fault; answers its id
    GET    /faults                         the faults in force
    DELETE /faults, /faults/{id}           take all faults, or one, out of force
    GET    /stats                          counts, `charges_per_key`, double-charged invoices
    GET    /world                          the world `world_odds` cards follow: name, description

A charge answers 200 with the `Charge` whatever its status: a decline is a result, not an
error. Errors are `application/problem+json` (`type`, `title`, `status`, `detail`, and
`field` for bad input): `ProviderTimeout` → 504 (after the fault's delay; for "timeout after"
the charge was made first), `ProviderUnavailable` → 503, a reused key with other terms → 422
`idempotency-key-mismatch`, a missing key → 400, other bad input → 422, no such card,
charge or fault → 404.

The gateway is synchronous and may sleep (slow faults), so each call runs in a worker thread.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from recoup.errors import InvalidInput, NotFound, RecoupError
from recoup.payments import wire
from recoup.payments.gateway import SimulatedGateway
from recoup.payments.provider import IdempotencyKeyMismatch, ProviderTimeout, ProviderUnavailable
from recoup.payments.wire import TYPE_BASE
from recoup.timekeeping.instants import format_utc

PROBLEM_MEDIA_TYPE = "application/problem+json"
MAX_BODY_BYTES = 64 * 1024  # a charge, a card or a fault is far smaller than this

Endpoint = Callable[[Request], Awaitable[Response]]


class MissingKey(InvalidInput):
    """A charge with no idempotency key: 400, as the IETF Idempotency-Key draft says."""

    http_status = 400


def problem(status: int, slug: str, title: str, detail: str, **extra: Any) -> JSONResponse:
    body = {"type": TYPE_BASE + slug, "title": title, "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE)


def _problem_for(exc: RecoupError) -> JSONResponse:
    """Domain errors → problems, in one place (checked most specific first)."""
    if isinstance(exc, InvalidInput):
        # `field`, `value` and `allowed` let the client raise the very same error.
        parts = {"field": exc.field, "value": _json_safe(exc.value), "allowed": exc.allowed}
        if isinstance(exc, IdempotencyKeyMismatch):
            return problem(422, "idempotency-key-mismatch", "Key reused", str(exc), **parts)
        if isinstance(exc, MissingKey):
            return problem(400, "missing-idempotency-key", "Key missing", str(exc), **parts)
        return problem(422, "invalid-input", "Invalid input", str(exc), **parts)
    if isinstance(exc, ProviderTimeout):
        return problem(504, "timeout", "Gateway timeout", str(exc))
    if isinstance(exc, ProviderUnavailable):
        return problem(503, "unavailable", "Gateway unavailable", str(exc))
    if isinstance(exc, NotFound):
        return problem(404, "not-found", "Not found", str(exc))
    return problem(500, "internal", "Internal error", str(exc))


def _json_safe(value: object) -> object:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _handled(endpoint: Endpoint) -> Endpoint:
    async def wrapper(request: Request) -> Response:
        try:
            return await endpoint(request)
        except RecoupError as exc:
            return _problem_for(exc)

    return wrapper


async def _body(request: Request, *, optional: bool = False) -> Any:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidInput("body", f"{len(raw)} bytes", f"expected at most {MAX_BODY_BYTES} bytes")
    if optional and not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("body", raw[:40].decode("utf-8", "replace"), "expected JSON") from None


def _header_key(request: Request) -> str | None:
    """The `Idempotency-Key` header, bare or as an RFC 8941 string (`"…"`, as the IETF draft
    writes it)."""
    value = request.headers.get("idempotency-key")
    if value is None:
        return None
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return value


def create_gateway_app(gateway: SimulatedGateway) -> Starlette:
    """The HTTP face of `gateway` (endpoints in the module docstring)."""

    async def create_charge(request: Request) -> Response:
        data = await _body(request)
        try:
            charge_request = wire.charge_request_from_json(data, header_key=_header_key(request))
        except InvalidInput as exc:
            if exc.field == "idempotency_key" and exc.value is None:
                raise MissingKey(exc.field, exc.value, exc.allowed) from None
            raise
        charge = await run_in_threadpool(gateway.charge, charge_request)
        return JSONResponse(wire.charge_to_json(charge))

    async def get_charge(request: Request) -> Response:
        key = request.path_params["key"]
        charge = await run_in_threadpool(gateway.find_charge, key)
        if charge is None:
            raise NotFound(f"no charge under key {key!r}")
        return JSONResponse(wire.charge_to_json(charge))

    async def invoice_charges(request: Request) -> Response:
        invoice_id = request.path_params["invoice_id"]
        charges = gateway.charges_for_invoice(invoice_id)
        return JSONResponse(
            {
                "invoice_id": invoice_id,
                "charges": [wire.charge_to_json(c) for c in charges],
                "total_charged": gateway.total_charged(invoice_id),
            }
        )

    async def add_card(request: Request) -> Response:
        fingerprint, scenario = wire.card_from_json(await _body(request))
        gateway.add_card(fingerprint, scenario)
        body = {
            "fingerprint": fingerprint,
            "scenario": None if scenario is None else wire.scenario_to_json(scenario),
        }
        return JSONResponse(body, status_code=201)

    async def update_card(request: Request) -> Response:
        fingerprint = request.path_params["fingerprint"]
        at = wire.update_from_json(await _body(request, optional=True))
        updated_at = gateway.update_card(fingerprint, at=at)
        return JSONResponse({"fingerprint": fingerprint, "updated_at": format_utc(updated_at)})

    async def add_fault(request: Request) -> Response:
        fault = wire.fault_from_json(await _body(request))
        fault_id = gateway.inject(fault)
        return JSONResponse({"id": fault_id, **wire.fault_to_json(fault)}, status_code=201)

    async def list_faults(request: Request) -> Response:
        return JSONResponse({"faults": [wire.injected_to_json(f) for f in gateway.faults()]})

    async def clear_faults(request: Request) -> Response:
        gateway.clear_faults()
        return Response(status_code=204)

    async def remove_fault(request: Request) -> Response:
        gateway.remove_fault(request.path_params["fault_id"])
        return Response(status_code=204)

    async def stats(request: Request) -> Response:
        return JSONResponse(wire.stats_to_json(gateway.stats()))

    async def world(request: Request) -> Response:
        current = gateway.world
        return JSONResponse(
            {
                "name": current.name,
                "description": current.description,
                "time_structure": current.has_time_structure,
            }
        )

    routes = [
        Route("/charges", _handled(create_charge), methods=["POST"]),
        # `path` so keys may hold slashes; colons (`charge:inv_1:2`) need nothing special.
        Route("/charges/{key:path}", _handled(get_charge), methods=["GET"]),
        Route("/invoices/{invoice_id:path}/charges", _handled(invoice_charges), methods=["GET"]),
        Route("/cards", _handled(add_card), methods=["POST"]),
        Route("/cards/{fingerprint:path}/update", _handled(update_card), methods=["POST"]),
        Route("/faults", _handled(add_fault), methods=["POST"]),
        Route("/faults", _handled(list_faults), methods=["GET"]),
        Route("/faults", _handled(clear_faults), methods=["DELETE"]),
        Route("/faults/{fault_id}", _handled(remove_fault), methods=["DELETE"]),
        Route("/stats", _handled(stats), methods=["GET"]),
        Route("/world", _handled(world), methods=["GET"]),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: _http_problem})


async def _http_problem(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 and 405 (no such route or method), in the same problem shape."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else str(exc)
    return problem(status, "http", "HTTP error", f"{request.method} {request.url.path}: {detail}")


__all__ = ["MAX_BODY_BYTES", "PROBLEM_MEDIA_TYPE", "create_gateway_app"]
