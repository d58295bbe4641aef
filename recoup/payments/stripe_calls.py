"""One call to the Stripe API as a value, and what the halves of the Stripe client
(`stripe_invoices.py`: paying and reading invoices; `stripe_final_actions.py`: the final
actions) need of the connection that makes it. The connection is `stripe_billing.py`'s, the
only module of the package that imports the SDK: the halves see its errors as `CallError`
values, already scrubbed of the API key, so they import no SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, kw_only=True)
class CallError:
    """What a failed call tells: `detail` a short line without the API key; `transport`: it
    failed in transport (timeout, connection, 429, 5xx), its fate unknown; `missing`: no such
    object (404); `card_declined`: a card error (402); `json_body` Stripe's error body."""

    detail: str
    transport: bool
    missing: bool
    card_declined: bool
    json_body: object  # as the SDK gives it: a JSON object, or None


@dataclass(frozen=True)
class Answer:
    """One SDK call: the object's JSON, or the error; Stripe's Request-Id either way."""

    body: Mapping[str, Any] | None
    error: CallError | None
    request_id: str | None

    @property
    def transport(self) -> bool:
        """The call failed in transport (timeout, connection, 429, 5xx): its fate is unknown."""
        return self.error is not None and self.error.transport


class StripeCalls(Protocol):
    """A connection to one Stripe account: `v1` the SDK's services (`v1.invoices`, …), `call`
    runs one of them and raises nothing of Stripe's."""

    @property
    def v1(self) -> Any: ...

    def call(self, call: Callable[[], Any]) -> Answer: ...


__all__ = ["Answer", "CallError", "StripeCalls"]
