"""The plain ASGI and WSGI usage shown in `recoup.receiver`'s docstring runs as written."""

from __future__ import annotations

import asyncio
import io
import textwrap
from datetime import UTC, datetime
from typing import Any

import httpx

import recoup.receiver
from recoup.payments import SimulatedGateway
from recoup.receiver import ChargeEndpoint

from .conftest import NOW, SECRET, Db, body_of, signed


def documented(start: str, end: str | None) -> str:
    """The code block of the package docstring between the lines starting `start` and `end`."""
    doc = recoup.receiver.__doc__ or ""
    block = doc.split("\n" + start, 1)[1].split("\n", 1)[1]
    if end is not None:
        block = block.split("\n" + end, 1)[0]
    return textwrap.dedent(block)


def app_from_docs(start: str, end: str | None, endpoint: ChargeEndpoint[Any]) -> Any:
    namespace: dict[str, Any] = {"endpoint": endpoint}
    exec(documented(start, end), namespace)
    return namespace["app"]


def endpoint_for(db: Db, gateway: SimulatedGateway) -> ChargeEndpoint[Any]:
    # The documented apps read the system clock: sign "now" rather than the tests' NOW.
    return ChargeEndpoint(
        database=db.database, provider=gateway, invoices=db.invoices, secret=SECRET
    )


def test_the_wsgi_example_charges(db: Db, gateway: SimulatedGateway) -> None:
    db.add_invoice()
    app = app_from_docs("WSGI:", None, endpoint_for(db, gateway))
    headers, raw = signed(body_of(scheduled_at=NOW), at=datetime.now(UTC))
    environ = {
        "REQUEST_METHOD": "POST",
        "CONTENT_LENGTH": str(len(raw)),
        "wsgi.input": io.BytesIO(raw),
        **{"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()},
    }
    started: list[str] = []

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        started.append(status)

    body = b"".join(app(environ, start_response))
    assert started == ["200 OK"]
    assert b'"succeeded"' in body
    assert db.status() == "paid"


def test_the_asgi_example_charges(db: Db, gateway: SimulatedGateway) -> None:
    db.add_invoice()
    app = app_from_docs("Plain ASGI", "WSGI:", endpoint_for(db, gateway))
    headers, raw = signed(body_of(scheduled_at=NOW), at=datetime.now(UTC))

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.post("/", content=raw, headers=headers)

    answer = asyncio.run(call())
    assert answer.status_code == 200
    assert answer.json()["outcome"] == "succeeded"
