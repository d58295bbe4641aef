"""The receiver's errors, and the HTTP status each one is answered with.

    RecoupError                       (recoup.errors)
    ├── InvalidInput                  422: a body field, a header or a request that does not
    │                                 match the invoice; names the field
    ├── NotFound
    │   └── UnknownInvoice            404: the user's database has no such invoice
    ├── StorageError                  503: the handler's database refused or is unreachable
    ├── PaymentError                  (recoup.payments.provider)
    │   └── ProviderUnavailable       503: the provider did nothing; Recoup retries the attempt
    └── ReceiverError
        └── SignatureError            401: a missing or malformed header, or no signature
            │                         that matches the secret
            └── TimestampOutOfTolerance   401: `webhook-timestamp` too old or too far ahead

Every status the endpoint answers is a 4xx that Recoup treats as a refusal, or a 5xx that makes
it retry the same attempt; `ChargeEndpoint` does the mapping, in one place.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from recoup.errors import NotFound, RecoupError


class ReceiverError(RecoupError):
    """Base of the errors only the receiver raises."""


class SignatureError(ReceiverError):
    """The request is not provably from the holder of the secret: refuse it (401)."""

    http_status = 401


class TimestampOutOfTolerance(SignatureError):
    """`webhook-timestamp` is further than the tolerance from the receiver's clock: a replay
    of an old request, or a sender whose clock is wrong."""

    def __init__(self, timestamp: datetime, now: datetime, tolerance: timedelta) -> None:
        self.timestamp = timestamp
        self.now = now
        self.tolerance = tolerance
        direction = "old" if timestamp < now else "far in the future"
        super().__init__(
            f"webhook-timestamp: {timestamp.isoformat()} is too {direction}; expected within "
            f"{tolerance.total_seconds():g} s of {now.isoformat()}"
        )


class UnknownInvoice(NotFound):
    """The invoice named by the request is not in the user's invoice table."""

    def __init__(self, invoice_id: str) -> None:
        self.invoice_id = invoice_id
        super().__init__(f"invoice_id: no invoice {invoice_id!r}")


__all__ = ["ReceiverError", "SignatureError", "TimestampOutOfTolerance", "UnknownInvoice"]
