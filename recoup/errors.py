"""The one exception root of Recoup: every exception class of the package derives from
`RecoupError` (tests/test_errors.py walks the package and holds it to that, and to `HOMES`).

The root and its kinds are defined here; the others where they are raised, each named in
`HOMES` with its module (this module imports nothing of Recoup's, so it lists them rather
than re-exporting them):

    RecoupError
    ├── InvalidInput            bad input: names the field, the value and what is allowed
    │   ├── UnknownTimeZone
    │   ├── ConfigError         a policy or settings file that does not validate
    │   ├── TargetRefused       jobs.ssrf: an HTTP target the SSRF guard refuses
    │   ├── OutOfRange          timekeeping.recurrence
    │   ├── SeriesEnded         timekeeping.recurrence
    │   ├── ExactlyOne          wire.schemas.common
    │   ├── MissingKey          payments.server
    │   └── IdempotencyKeyMismatch   payments.provider (a PaymentError too)
    ├── NotFound                no such job, schedule, tenant or token (for this tenant)
    │   ├── UnknownInvoice      receiver.errors
    │   └── NotFoundError       client (an ApiError too)
    ├── Conflict                a live job or schedule already holds that name; a key in flight
    │   ├── JobStarted          jobs.patching
    │   ├── EventInProgress     recovery.stripe_intake
    │   └── ConflictError       client (an ApiError too)
    ├── StorageError            the database refused or is unreachable
    ├── PermanentError          jobs.handlers: a handler fails its job, without retry
    ├── AskAgain                recovery.attempts: a charge attempt retried with its backoff
    ├── PaymentError            payments.provider: a payment provider's failure
    │   ├── ProviderTimeout     payments.provider
    │   ├── ProviderUnavailable payments.provider
    │   └── StripeLookupFailed  payments.stripe_answers
    ├── InvalidUpdateToken      messages.tokens: an update-card link's token not to honour
    ├── ReceiverError           receiver.errors
    │   └── SignatureError      receiver.errors
    │       └── TimestampOutOfTolerance   receiver.errors
    ├── ApiError                client: the SDK's errors
    │   ├── Unauthorized        client
    │   ├── InvalidRequest      client
    │   │   └── Unprocessable   client
    │   ├── ServerError         client
    │   └── TransportFailure    client
    ├── SendFailed              messages.channel: an email not accepted this time (retried)
    ├── RecipientRefused        messages.channel: a 5xx to RCPT (a bounce)
    ├── SecretKeyMissing        sealed
    ├── SecretUnreadable        sealed
    ├── BillingAppError         demo.billing_side
    ├── ApiProblem              api.problems: answered with its exact status and headers
    ├── BodyTooLarge            api.problems (a Starlette HTTPException first: 413)
    ├── LoginRequired           api.dashboard.web: the dashboard's login page
    ├── CsrfRefused             api.dashboard.web
    ├── _Refused                api.idempotent: an atomic run's refusal, undoing its unit
    ├── _Clashed                storage.sqlite.job_creation: a creation's clash, undoing its unit
    ├── StaleToken              api.token_cache: a cached token owner to read again
    └── _LockLost               contrib.django.webhooks: an idempotency key taken over

Edges translate: the CLI prints one line and exits 2 for `InvalidInput`, the API answers
problem+json with the status that `http_status` gives. A handler's exception is told apart by
its class, never by the root: `PermanentError` fails its job, any other (`AskAgain` included)
is retried.
"""

from __future__ import annotations


class RecoupError(Exception):
    """Base of every error Recoup raises on purpose."""

    http_status = 500


class InvalidInput(RecoupError, ValueError):
    """Input that cannot be accepted. `field` names it, `value` is what was given,
    `allowed` says what would have been accepted."""

    http_status = 422

    def __init__(self, field: str, value: object, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}: {value!r} is not valid; {allowed}")


class UnknownTimeZone(InvalidInput):
    def __init__(self, field: str, value: object) -> None:
        super().__init__(field, value, "expected an IANA time zone name such as 'Europe/Paris'")


class ConfigError(InvalidInput):
    """A configuration file that does not validate; `field` is a dotted path inside it."""


class NotFound(RecoupError, LookupError):
    http_status = 404


class Conflict(RecoupError):
    http_status = 409


class StorageError(RecoupError):
    http_status = 503


# Every exception class defined outside this module → the module it is imported from.
HOMES: dict[str, str] = {
    "ApiError": "recoup.client",
    "ApiProblem": "recoup.api.problems",
    "AskAgain": "recoup.recovery.attempts",
    "BillingAppError": "recoup.demo.billing_side",
    "BodyTooLarge": "recoup.api.problems",
    "ConflictError": "recoup.client",
    "CsrfRefused": "recoup.api.dashboard.web",
    "EventInProgress": "recoup.recovery.stripe_intake",
    "ExactlyOne": "recoup.wire.schemas.common",
    "IdempotencyKeyMismatch": "recoup.payments.provider",
    "InvalidRequest": "recoup.client",
    "InvalidUpdateToken": "recoup.messages.tokens",
    "JobStarted": "recoup.jobs.patching",
    "LoginRequired": "recoup.api.dashboard.web",
    "MissingKey": "recoup.payments.server",
    "NotFoundError": "recoup.client",
    "OutOfRange": "recoup.timekeeping.recurrence",
    "PaymentError": "recoup.payments.provider",
    "PermanentError": "recoup.jobs.handlers",
    "ProviderTimeout": "recoup.payments.provider",
    "ProviderUnavailable": "recoup.payments.provider",
    "ReceiverError": "recoup.receiver.errors",
    "RecipientRefused": "recoup.messages.channel",
    "SecretKeyMissing": "recoup.sealed",
    "SecretUnreadable": "recoup.sealed",
    "SendFailed": "recoup.messages.channel",
    "SeriesEnded": "recoup.timekeeping.recurrence",
    "ServerError": "recoup.client",
    "SignatureError": "recoup.receiver.errors",
    "StaleToken": "recoup.api.token_cache",
    "StripeLookupFailed": "recoup.payments.stripe_answers",
    "TargetRefused": "recoup.jobs.ssrf",
    "TimestampOutOfTolerance": "recoup.receiver.errors",
    "TransportFailure": "recoup.client",
    "Unauthorized": "recoup.client",
    "UnknownInvoice": "recoup.receiver.errors",
    "Unprocessable": "recoup.client",
    "_Clashed": "recoup.storage.sqlite.job_creation",
    "_LockLost": "recoup.contrib.django.webhooks",
    "_Refused": "recoup.api.idempotent",
}

__all__ = [
    "HOMES",
    "ConfigError",
    "Conflict",
    "InvalidInput",
    "NotFound",
    "RecoupError",
    "StorageError",
    "UnknownTimeZone",
]
