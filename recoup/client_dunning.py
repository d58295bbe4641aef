"""The /v1/dunning and /v1/clock calls of the Python client (`recoup.client.Client`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from recoup.api.dunning_schemas import (
    ClockOut,
    InvoiceOut,
    InvoicePageOut,
    SettingsOut,
    TimelineOut,
)

M = TypeVar("M", bound=BaseModel)


class DunningCalls:
    """Failures in, invoices and their timelines, payments, card updates, settings, and the
    test clock. Every POST is sent under an Idempotency-Key, the same on each retry."""

    def _get(self, model: type[M], path: str, params: Mapping[str, Any] | None = None) -> M:
        raise NotImplementedError

    def _post(self, model: type[M], path: str, payload: Any, idempotency_key: str | None) -> M:
        raise NotImplementedError

    def _put_json(self, model: type[M], path: str, payload: Any) -> M:
        raise NotImplementedError

    def report_failure(
        self,
        *,
        invoice_id: str,
        customer_id: str,
        amount: int,
        currency: str,
        failed_at: datetime,
        timezone: str,
        country: str | None = None,
        decline_code: str | None = None,
        advice_code: str | None = None,
        card_fingerprint: str | None = None,
        card_network: str | None = None,
        gateway: str | None = None,
        merchant_id: str | None = None,
        charge_url: str | None = None,
        idempotency_key: str | None = None,
    ) -> InvoiceOut:
        """Hand a failed charge to Recoup; the same failure again returns the same invoice."""
        payload: dict[str, Any] = {
            "invoice_id": invoice_id,
            "customer_id": customer_id,
            "amount": amount,
            "currency": currency,
            "failed_at": failed_at.isoformat(),
            "timezone": timezone,
        }
        card = {"fingerprint": card_fingerprint, "network": card_network}
        if any(card.values()):
            payload["card"] = {k: v for k, v in card.items() if v is not None}
        optional = {
            "country": country,
            "decline_code": decline_code,
            "advice_code": advice_code,
            "gateway": gateway,
            "merchant_id": merchant_id,
            "charge_url": charge_url,
        }
        payload.update({k: v for k, v in optional.items() if v is not None})
        return self._post(InvoiceOut, "/v1/dunning/failures", payload, idempotency_key)

    def get_invoice(self, invoice_id: str) -> TimelineOut:
        return self._get(TimelineOut, f"/v1/dunning/invoices/{_seg(invoice_id)}")

    def list_invoices(
        self,
        *,
        state: str | None = None,
        customer_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> InvoicePageOut:
        params = {"state": state, "customer_id": customer_id, "limit": limit, "cursor": cursor}
        return self._get(InvoicePageOut, "/v1/dunning/invoices", params)

    def mark_paid(self, invoice_id: str, *, idempotency_key: str | None = None) -> InvoiceOut:
        path = f"/v1/dunning/invoices/{_seg(invoice_id)}/paid"
        return self._post(InvoiceOut, path, {}, idempotency_key)

    def payment_method_updated(
        self, invoice_id: str, *, idempotency_key: str | None = None
    ) -> InvoiceOut:
        path = f"/v1/dunning/invoices/{_seg(invoice_id)}/payment-method-updated"
        return self._post(InvoiceOut, path, {}, idempotency_key)

    def report_outcome(
        self,
        invoice_id: str,
        attempt: int,
        outcome: str,
        *,
        decline_code: str | None = None,
        advice_code: str | None = None,
        idempotency_key: str | None = None,
    ) -> InvoiceOut:
        path = f"/v1/dunning/invoices/{_seg(invoice_id)}/attempts/{attempt}/outcome"
        payload = {"outcome": outcome, "decline_code": decline_code, "advice_code": advice_code}
        return self._post(InvoiceOut, path, payload, idempotency_key)

    def dunning_settings(self) -> SettingsOut:
        return self._get(SettingsOut, "/v1/dunning/settings")

    def configure_dunning(
        self,
        *,
        policy: str | None = None,
        event_url: str | None = None,
        charge_url: str | None = None,
    ) -> SettingsOut:
        """Replace the tenant's settings (what is not given is cleared)."""
        payload = {"policy": policy, "event_url": event_url, "charge_url": charge_url}
        return self._put_json(SettingsOut, "/v1/dunning/settings", payload)

    def clock(self) -> ClockOut:
        """The test clock of a server started with `--clock virtual:…` (404 elsewhere)."""
        return self._get(ClockOut, "/v1/clock")

    def advance_clock(
        self, *, seconds: float | None = None, to: datetime | None = None
    ) -> ClockOut:
        """Move the test clock by `seconds` or to `to`; returns once every job due up to then
        has run. Sent as an absolute instant, so a retry after a lost answer moves nothing."""
        if (seconds is None) == (to is None):
            raise ValueError("give seconds or to, not both")
        target = to if to is not None else self.clock().now + timedelta(seconds=seconds or 0)
        return self._post(ClockOut, "/v1/clock", {"to": target.isoformat()}, None)


def _seg(value: str) -> str:
    return quote(value, safe="")


__all__ = ["DunningCalls"]
