"""The charge endpoint, independent of any web framework: headers and raw body in, status,
headers and body out. `recoup.receiver.fastapi` mounts it on FastAPI; the package docstring
shows plain ASGI and WSGI.

Order of checks, and what each failure answers (Recoup retries the attempt on a 5xx, and takes
any other 4xx as a refusal):

1. the Standard Webhooks signature and timestamp → 401;
2. the body (`ChargeAttempt.from_json`) and `Idempotency-Key` equal to its `idempotency_key` →
   422 naming the field;
3. the idempotency key: a stored answer is replayed (with `Idempotent-Replayed: true`), a
   request still in flight → 409 with `Retry-After`, another body under the key → 422;
4. `charge_invoice`: 200 with the outcome; no such invoice → 404; a request that disagrees
   with the invoice → 422; the provider unavailable or the database failing → 503.

Only final answers (succeeded, failed, already_handled) are stored under the key. A `pending`
answer and every error release it, so Recoup's next ask runs again and reconciles through the
ledger instead of being handed the old answer forever.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import Any, Final, Generic

from recoup.errors import InvalidInput, RecoupError, StorageError
from recoup.idempotency.keys import InProgress, Mismatch, New, Replay
from recoup.payments.provider import PaymentProvider, ProviderUnavailable
from recoup.receiver.charging import InvoiceBook, charge_invoice
from recoup.receiver.contract import ChargeAttempt, ChargeOutcome
from recoup.receiver.database import C, Database
from recoup.receiver.errors import SignatureError
from recoup.receiver.idempotency import DEFAULT_LOCK_TIMEOUT, IdempotencyStore, body_fingerprint
from recoup.receiver.signatures import DEFAULT_TOLERANCE, check_secrets, verify_signature

JSON: Final = "application/json"
PROBLEM_JSON: Final = "application/problem+json"
UNAVAILABLE_RETRY_AFTER: Final = 60  # seconds: a provider outage rarely clears sooner

log = logging.getLogger("recoup.receiver")


@dataclass(frozen=True, kw_only=True)
class HttpResponse:
    """An answer to send as is: `headers` include `content-type`."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body)


class ChargeEndpoint(Generic[C]):
    """Recoup's charge requests, verified, deduplicated and charged at most once.

    `secret` is the tenant's `whsec_…` secret (several while rotating); `tolerance` bounds
    the age of `webhook-timestamp`; `lock_timeout` is how long an in-flight key stays locked
    before another request may take it over (keep it above the provider's timeout).
    The receiver's tables must exist: call `database.ensure_schema()` at start-up.
    """

    def __init__(
        self,
        *,
        database: Database[C],
        provider: PaymentProvider,
        invoices: InvoiceBook[C],
        secret: str | Sequence[str],
        tolerance: timedelta = DEFAULT_TOLERANCE,
        lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        self.secrets = check_secrets(secret)
        if tolerance <= timedelta(0):
            raise InvalidInput("tolerance", tolerance, "expected a positive duration")
        self.database = database
        self.provider = provider
        self.invoices = invoices
        self.tolerance = tolerance
        self.keys = IdempotencyStore(database, lock_timeout=lock_timeout)

    def handle(self, headers: Mapping[str, str], body: bytes, *, now: datetime) -> HttpResponse:
        """Answer one POST. `headers` may use any case; `body` is the raw bytes received;
        `now` is the real instant of receipt (the signature's timestamp is checked against
        it)."""
        found = {name.lower(): value for name, value in headers.items()}
        try:
            verify_signature(found, body, secret=self.secrets, now=now, tolerance=self.tolerance)
        except SignatureError as exc:
            return problem(HTTPStatus.UNAUTHORIZED, "invalid-signature", str(exc))
        try:
            attempt = ChargeAttempt.from_json(body)
            key = _idempotency_key(found, attempt)
        except InvalidInput as exc:
            return problem(HTTPStatus.UNPROCESSABLE_ENTITY, "invalid-request", str(exc), exc)

        try:
            claim = self.keys.begin(key, body_fingerprint(body), now=now)
        except StorageError as exc:
            return _unavailable("storage-unavailable", str(exc))
        match claim:
            case Replay(status=status, body=stored, content_type=content_type):
                headers_out = {"content-type": content_type, "idempotent-replayed": "true"}
                return HttpResponse(status=status, body=stored, headers=headers_out)
            case InProgress(retry_after=seconds):
                detail = f"Idempotency-Key: {key!r} is being processed by another request"
                return problem(HTTPStatus.CONFLICT, "in-progress", detail, retry_after=seconds)
            case Mismatch():
                detail = f"Idempotency-Key: {key!r} was first used with another body"
                return problem(HTTPStatus.UNPROCESSABLE_ENTITY, "key-reused", detail)
            case New(locked_at=locked_at):
                return self._charge(attempt, key, locked_at, now)

    def _charge(
        self, attempt: ChargeAttempt, key: str, locked_at: datetime, now: datetime
    ) -> HttpResponse:
        try:
            result = charge_invoice(self.database, self.provider, self.invoices, attempt, now=now)
        except BaseException as exc:
            self._release(key, locked_at)
            if isinstance(exc, ProviderUnavailable):
                return _unavailable("provider-unavailable", str(exc) or "the provider is down")
            if isinstance(exc, StorageError):
                return _unavailable("storage-unavailable", str(exc))
            if isinstance(exc, RecoupError) and 400 <= exc.http_status < 500:
                field_error = exc if isinstance(exc, InvalidInput) else None
                status = HTTPStatus(exc.http_status)
                return problem(status, "refused", str(exc), field_error)
            raise  # a bug: the framework answers 500, and Recoup retries the attempt
        response = HttpResponse(
            status=int(HTTPStatus.OK),
            body=json.dumps(result.to_json()).encode(),
            headers={"content-type": JSON},
        )
        if result.outcome is ChargeOutcome.PENDING:
            self._release(key, locked_at)
            return response
        try:
            self.keys.complete(
                key,
                locked_at=locked_at,
                status=response.status,
                body=response.body,
                content_type=JSON,
            )
        except StorageError:
            # The charge is committed and this answer is right; a repeat finds the key locked
            # until lock_timeout, then takes it over and gets the same answer from the ledger.
            log.warning("could not store the answer under idempotency key %r", key, exc_info=True)
        return response

    def _release(self, key: str, locked_at: datetime) -> None:
        try:
            self.keys.release(key, locked_at=locked_at)
        except StorageError:
            # The database is failing too: the lock simply expires after lock_timeout.
            log.warning("could not release idempotency key %r", key, exc_info=True)


def _idempotency_key(headers: Mapping[str, str], attempt: ChargeAttempt) -> str:
    header = headers.get("idempotency-key", "").strip()
    # RFC 8941 sf-string form ("…"), which the IETF draft specifies, or a bare token.
    if len(header) >= 2 and header[0] == header[-1] == '"':
        header = header[1:-1]
    if not header:
        raise InvalidInput("Idempotency-Key", None, "expected the header, as Recoup sends it")
    if header != attempt.idempotency_key:
        raise InvalidInput(
            "Idempotency-Key",
            header,
            f"expected the body's idempotency_key {attempt.idempotency_key!r}",
        )
    return header


def problem(
    status: HTTPStatus,
    slug: str,
    detail: str,
    error: InvalidInput | None = None,
    *,
    retry_after: int | None = None,
) -> HttpResponse:
    """An RFC 9457 problem+json answer; `error` adds the invalid field by name."""
    body: dict[str, Any] = {
        "type": f"urn:recoup:receiver:{slug}",
        "title": status.phrase,
        "status": int(status),
        "detail": detail,
    }
    if error is not None:
        body["errors"] = [{"field": error.field, "message": error.allowed}]
    headers = {"content-type": PROBLEM_JSON}
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    return HttpResponse(status=int(status), body=json.dumps(body).encode(), headers=headers)


def _unavailable(slug: str, detail: str) -> HttpResponse:
    return problem(
        HTTPStatus.SERVICE_UNAVAILABLE, slug, detail, retry_after=UNAVAILABLE_RETRY_AFTER
    )


__all__ = ["ChargeEndpoint", "HttpResponse", "problem"]
