"""A library for users' charge endpoints: the HTTP endpoint Recoup calls at each retry's instant
to charge one attempt of one invoice, exactly once however often the request arrives.

Four layers, each usable on its own:

- `verify_signature` (signatures): the Standard Webhooks headers against the tenant's secret,
  with the timestamp within a tolerance of an injected `now`;
- `IdempotencyStore` (idempotency): request keys in the handler's own database: replay a
  completed answer, 409 while in flight, 422 for another body under the key;
- `charge_invoice` (charging): lock the invoice, re-check it, charge under the provider's key,
  record the result in the `receiver_charges` ledger, reconcile ambiguous (pending) charges
  with `find_charge` before charging again;
- `ChargeEndpoint` (endpoint): all three behind one `handle(headers, body, now=…)`, mapped to
  the statuses Recoup understands; `recoup.receiver.fastapi.charge_router` mounts it.

And for the customer emails' one-tap link: `verify_update_token(token, secret,
customer_id=…)` (`recoup.messages.tokens`) checks the `{token}` of the tenant's update-card
URL with the same `whsec_…` secret, so the card page needs no login.

The user supplies their database (`SqliteDatabase(path)` or `PostgresDatabase.connect(url)`),
a `PaymentProvider`, and an `InvoiceBook`: how to lock and read an invoice and mark it paid,
on the receiver's own transaction. `examples/billing_app` is a complete application.

FastAPI:

    app.include_router(charge_router(endpoint, path="/recoup/charge"))

Plain ASGI (the endpoint blocks, so it runs in a worker thread):

    import anyio
    from datetime import UTC, datetime

    async def app(scope, receive, send):
        assert scope["type"] == "http" and scope["method"] == "POST"
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        answer = await anyio.to_thread.run_sync(
            lambda: endpoint.handle(headers, body, now=datetime.now(UTC))
        )
        await send({"type": "http.response.start", "status": answer.status,
                    "headers": [(k.encode(), v.encode()) for k, v in answer.headers.items()]})
        await send({"type": "http.response.body", "body": answer.body})

WSGI:

    from datetime import UTC, datetime
    from http import HTTPStatus

    def app(environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        headers = {k[5:].replace("_", "-").lower(): v
                   for k, v in environ.items() if k.startswith("HTTP_")}
        answer = endpoint.handle(headers, body, now=datetime.now(UTC))
        start_response(f"{answer.status} {HTTPStatus(answer.status).phrase}",
                       list(answer.headers.items()))
        return [answer.body]
"""

from typing import TYPE_CHECKING, Any

from recoup.messages.tokens import InvalidUpdateToken, UpdateToken, verify_update_token
from recoup.receiver.charging import (
    Invoice,
    InvoiceBook,
    LedgerEntry,
    charge_invoice,
    ledger_entries,
)
from recoup.receiver.contract import ChargeAttempt, ChargeOutcome, ChargeResult
from recoup.receiver.database import Database, SqliteDatabase
from recoup.receiver.endpoint import ChargeEndpoint, HttpResponse
from recoup.receiver.errors import (
    ReceiverError,
    SignatureError,
    TimestampOutOfTolerance,
    UnknownInvoice,
)
from recoup.receiver.idempotency import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_RETENTION,
    IdempotencyStore,
    body_fingerprint,
)
from recoup.receiver.signatures import DEFAULT_TOLERANCE, SignedMessage, verify_signature

if TYPE_CHECKING:
    from recoup.receiver.postgres import PostgresDatabase


def __getattr__(name: str) -> Any:
    # PostgreSQL support loads on first use: a SQLite-only application needs no psycopg.
    if name == "PostgresDatabase":
        from recoup.receiver.postgres import PostgresDatabase

        return PostgresDatabase
    raise AttributeError(f"module 'recoup.receiver' has no attribute {name!r}")


__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_RETENTION",
    "DEFAULT_TOLERANCE",
    "ChargeAttempt",
    "ChargeEndpoint",
    "ChargeOutcome",
    "ChargeResult",
    "Database",
    "HttpResponse",
    "IdempotencyStore",
    "InvalidUpdateToken",
    "Invoice",
    "InvoiceBook",
    "LedgerEntry",
    "PostgresDatabase",
    "ReceiverError",
    "SignatureError",
    "SignedMessage",
    "SqliteDatabase",
    "TimestampOutOfTolerance",
    "UnknownInvoice",
    "UpdateToken",
    "body_fingerprint",
    "charge_invoice",
    "ledger_entries",
    "verify_signature",
    "verify_update_token",
]
