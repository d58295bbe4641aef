"""Fuzzing the receiver library through its FastAPI mount, on SQLite and PostgreSQL: any
headers, any body and any signature get a verified charge or a clean refusal (401, 404, 409,
422) as problem+json; never a 5xx (the provider and the database are healthy here), never a
traceback. Requests are signed with the right secret half the time, so the fuzzed bodies reach
the checks behind the signature too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.jobs.signing import new_signing_secret, signature_headers
from recoup.payments import SimulatedGateway
from recoup.receiver import ChargeEndpoint
from recoup.receiver.errors import SignatureError
from recoup.receiver.fastapi import charge_router
from recoup.receiver.signatures import verify_signature
from recoup.timekeeping.clock import VirtualClock
from tests.receiver.conftest import NOW, SECRET, Db, db, in_process

__all__ = ["db"]

PATH = "/recoup/charge"
INVOICES = ["inv_1", "inv_2", "inv_paid"]

TEXT = st.one_of(
    st.sampled_from(["inv_1", "inv_2", "inv_paid", "cus_1", "usd", "", " ", "\x00", "\ud800"]),
    st.text(max_size=8),
    st.text(min_size=300, max_size=400),
)
NUMBER = st.one_of(st.sampled_from([1, 2, 1999, 0, -1, True, 1.5, "2"]), st.integers(), st.floats())
INSTANT = st.sampled_from(
    ["2026-12-02T16:12:00Z", "2026-12-02T16:12:00+14:00", "0001-01-01T00:00:00+14:00", "x"]
) | st.datetimes().map(lambda d: d.isoformat())


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """A charge request near the contract (each field right, wrong or missing), or any JSON,
    or any bytes."""
    invoice = draw(st.sampled_from(INVOICES) | TEXT)
    attempt = draw(st.sampled_from([1, 2]) | NUMBER)
    fields: dict[str, Any] = {
        "invoice_id": invoice,
        "attempt": attempt,
        "idempotency_key": draw(st.just(f"retry:{invoice}:{attempt}") | TEXT),
        "charge_idempotency_key": draw(st.just(f"charge:{invoice}:{attempt}") | TEXT),
        "amount": draw(st.just(1999) | NUMBER),
        "currency": draw(st.just("usd") | TEXT),
        "customer_id": draw(st.just("cus_1") | TEXT),
        "scheduled_at": draw(INSTANT),
    }
    kept = {k: v for k, v in fields.items() if draw(st.integers(0, 9))}  # now and then one less
    shaped = json.dumps(kept).encode()  # lone surrogates leave as \\ud800 escapes, as JSON may
    anything = st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
        max_leaves=5,
    ).map(lambda value: json.dumps(value).encode())
    nested = st.integers(1, 100_000).map(lambda depth: b"[" * depth + b"]" * depth)
    return draw(st.just(shaped) | anything | st.binary(max_size=60) | nested)


HEADER_VALUES = st.one_of(
    st.sampled_from(["", " ", "msg_1", "v1,abc", "v1a,abc", "v1,", "v2,x v1,y", "\t"]),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=30),
)
TIMESTAMPS = st.one_of(
    # Seconds of every width up to the 12 digits accepted, each width as likely.
    st.integers(1, 12).flatmap(lambda n: st.integers(10 ** (n - 1), 10**n - 1)).map(str),
    st.integers(1, 12).flatmap(lambda n: st.integers(10 ** (n - 1), 10**n - 1)).map(str),
    st.sampled_from(["", "-1", "1.5", "1e9", "0x10", "١٢٣", " 1764691920 ", "99999999999999"]),
    st.integers(-600, 600).map(lambda s: str(int((NOW + timedelta(seconds=s)).timestamp()))),
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[dict[str, str], bytes]:
    """A request signed as Recoup signs it (with the tenant's secret, or another), over the
    exact bytes, then each header now and then fuzzed or removed."""
    body = draw(bodies())
    at = NOW + timedelta(seconds=draw(st.integers(-600, 600)))
    headers = {
        name.lower(): value
        for name, value in signature_headers(
            secret=draw(st.just(SECRET) | st.builds(new_signing_secret)),
            message_id="msg_1",
            timestamp=at,
            body=body.decode("utf-8", "replace"),
        ).items()
    }
    try:
        headers["idempotency-key"] = str(json.loads(body)["idempotency_key"])
    except Exception:
        headers["idempotency-key"] = "retry:inv_1:2"
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature", "idempotency-key"):
        fate = draw(st.integers(0, 9))
        if fate < 3:
            headers[name] = draw(TIMESTAMPS if name == "webhook-timestamp" else HEADER_VALUES)
        elif fate == 3:
            del headers[name]
    return headers, body


@pytest.fixture
def client(db: Db) -> Iterator[httpx.Client]:
    for invoice in INVOICES:
        db.add_invoice(invoice)
    db.pay_by_hand("inv_paid")
    endpoint = ChargeEndpoint(
        database=db.database,
        provider=SimulatedGateway(VirtualClock(NOW), seed=1),
        invoices=db.invoices,
        secret=SECRET,
    )
    app = FastAPI()
    app.include_router(charge_router(endpoint, path=PATH, clock=VirtualClock(NOW)))
    with in_process(app) as found:
        yield found


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=requests())
def test_any_request_is_charged_or_refused_never_a_5xx(
    client: httpx.Client, request: tuple[dict[str, str], bytes]
) -> None:
    headers, body = request
    encoded = {k: v.encode("latin-1", "replace") for k, v in headers.items()}
    response = client.post(PATH, content=body, headers=encoded)  # type: ignore[arg-type]
    assert response.status_code in (200, 401, 404, 409, 422), response.text
    answer = response.json()  # JSON, whatever the status
    if response.status_code == 200:
        assert answer["outcome"] in ("succeeded", "failed", "already_handled", "pending")
    else:
        assert response.headers["content-type"] == "application/problem+json"
        assert answer["status"] == response.status_code and answer["detail"]


@settings(max_examples=300, deadline=None)
@given(
    headers=st.dictionaries(
        st.sampled_from(["webhook-id", "Webhook-Timestamp", "WEBHOOK-SIGNATURE", "other"]),
        HEADER_VALUES | TIMESTAMPS,
    ),
    body=st.binary(max_size=40),
    secret=st.just(SECRET) | st.builds(new_signing_secret),
)
def test_a_signature_is_verified_or_refused_with_a_signature_error(
    headers: dict[str, str], body: bytes, secret: str
) -> None:
    try:
        verify_signature(headers, body, secret=secret, now=NOW)
    except SignatureError as exc:
        assert str(exc)


@pytest.mark.parametrize("timestamp", ["999999999999", "253402300800"])
def test_found_by_fuzzing_a_timestamp_past_year_9999_is_a_401(
    client: httpx.Client, timestamp: str
) -> None:
    # datetime.fromtimestamp raised ValueError (year 33658 is out of range): a 500 for any
    # caller, no secret needed.
    headers = {"webhook-id": "msg_1", "webhook-timestamp": timestamp, "webhook-signature": "v1,x"}
    response = client.post(PATH, content=b"{}", headers=headers)
    assert response.status_code == 401
    assert "webhook-timestamp" in response.json()["detail"]
