"""The one exception root of Recoup.

    RecoupError
    ├── InvalidInput          bad input: names the field, the value and what is allowed
    │   ├── UnknownTimeZone
    │   └── ConfigError       a policy or settings file that does not validate
    ├── NotFound              no such job, schedule, tenant or token (for this tenant)
    ├── Conflict              a live job or schedule already holds that name; a key in flight
    └── StorageError          the database refused or is unreachable

Edges translate: the CLI prints one line and exits 2 for `InvalidInput`, the API answers
problem+json with the status that `http_status` gives.
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
