"""A failed charge as it is reported (`ChargeFailure`): the one value that travels from an
entrance (the API's body, a Stripe event, the demo, a replay) to the invoice it opens.

Checked once, as it is made, and written in one form (currency in lower case, country in
upper case, card network in lower case), so that nothing downstream re-checks or copies it:
`recovery.records.FailureReport` is this value with who to write to, and the lifecycle's
`Opening` carries it whole. Pure: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from recoup.dunning.invoice import Invoice, check_invoice_id
from recoup.dunning.planner import Failure
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import require_aware
from recoup.timekeeping.zones import zone

MAX_ID_LENGTH = 100


@dataclass(frozen=True, kw_only=True)
class ChargeFailure:
    invoice_id: str
    customer_id: str
    amount: int  # minor units
    currency: str  # ISO 4217, kept in lower case
    failed_at: datetime
    timezone: str  # the customer's IANA zone
    country: str | None = None  # ISO 3166-1 alpha-2 (holidays), kept in upper case
    decline_code: str | None = None
    advice_code: str | None = None
    card_fingerprint: str | None = None
    card_network: str | None = None  # visa, mastercard, …, kept in lower case
    gateway: str | None = None
    merchant_id: str | None = None

    def __post_init__(self) -> None:
        require_aware("failed_at", self.failed_at)
        # Every entrance (API, Stripe intake, CLI, demo) builds one: the one check of ids.
        check_invoice_id(self.invoice_id)
        if not 1 <= len(self.customer_id) <= MAX_ID_LENGTH or "\x00" in self.customer_id:
            raise InvalidInput(
                "customer_id", self.customer_id, f"expected 1–{MAX_ID_LENGTH} characters"
            )
        if self.amount <= 0:
            raise InvalidInput("amount", self.amount, "expected a positive integer (minor units)")
        if len(self.currency) != 3 or not self.currency.isascii() or not self.currency.isalpha():
            raise InvalidInput("currency", self.currency, "expected an ISO 4217 code such as usd")
        zone(self.timezone)  # UnknownTimeZone names `timezone`
        # Frozen: the codes are written in their one form as the value is made.
        object.__setattr__(self, "currency", self.currency.lower())
        if self.country is not None:
            object.__setattr__(self, "country", self.country.upper())
        if self.card_network is not None:
            object.__setattr__(self, "card_network", self.card_network.lower())

    def same_failure(self, invoice: Invoice) -> bool:
        """A replayed report of the failure that opened `invoice` (a provider webhook sent
        twice): same instant, same decline."""
        return (
            invoice.failed_at == self.failed_at
            and invoice.decline_code == self.decline_code
            and invoice.advice_code == self.advice_code
        )

    def for_planner(self) -> Failure:
        """The planner's view of this failure (`planner.Failure`, which replays and
        `recoup plan` also build from their own rows): the one place the names differ."""
        return Failure(
            invoice=self.invoice_id,
            failed_at=self.failed_at,
            timezone=self.timezone,
            country=self.country,
            decline_code=self.decline_code,
            advice_codes=(self.advice_code,) if self.advice_code else (),
            card=self.card_fingerprint,
            network=self.card_network,
            gateway=self.gateway,
            merchant_id=self.merchant_id,
            amount=self.amount,
        )


__all__ = ["MAX_ID_LENGTH", "ChargeFailure"]
