"""The /v1/dunning and /v1/clock calls of the Python client (`recoup.client.Client`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from recoup.client.shapes import instant, seg
from recoup.client.transport import Transport
from recoup.wire.customers import CardUpdateOut, CustomerOut, RenewalOut
from recoup.wire.dunning import ClockOut, InvoiceOut, InvoicePageOut, TimelineOut
from recoup.wire.dunning_settings import SettingsOut
from recoup.wire.emails import EmailPreviewOut
from recoup.wire.reports import ReviewQueueOut, TagOut


class DunningCalls(Transport):
    """Failures in, invoices and their timelines, payments, card updates, settings, the
    recovery report and merchant tags, email previews, and the test clock. Every POST is sent
    under an Idempotency-Key, the same on each retry."""

    def report_failure(
        self,
        *,
        invoice_id: str,
        customer_id: str,
        amount: int,
        currency: str,
        failed_at: datetime | str,
        timezone: str,
        country: str | None = None,
        decline_code: str | None = None,
        advice_code: str | None = None,
        card_fingerprint: str | None = None,
        card_network: str | None = None,
        gateway: str | None = None,
        merchant_id: str | None = None,
        charge_url: str | None = None,
        customer_email: str | None = None,
        customer_name: str | None = None,
        locale: str | None = None,
        idempotency_key: str | None = None,
    ) -> InvoiceOut:
        """Hand a failed charge to Recoup; the same failure again returns the same invoice."""
        payload: dict[str, Any] = {
            "invoice_id": invoice_id,
            "customer_id": customer_id,
            "amount": amount,
            "currency": currency,
            "failed_at": instant("failed_at", failed_at),
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
            "customer_email": customer_email,
            "customer_name": customer_name,
            "locale": locale,
        }
        payload.update({k: v for k, v in optional.items() if v is not None})
        return self._post(InvoiceOut, "/v1/dunning/failures", payload, idempotency_key)

    def get_invoice(self, invoice_id: str) -> TimelineOut:
        return self._get(TimelineOut, f"/v1/dunning/invoices/{seg(invoice_id)}")

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
        path = f"/v1/dunning/invoices/{seg(invoice_id)}/paid"
        return self._post(InvoiceOut, path, {}, idempotency_key)

    def cancel_invoice(
        self, invoice_id: str, *, reason: str, idempotency_key: str | None = None
    ) -> InvoiceOut:
        """Stop dunning the invoice without a payment (state `cancelled`): nothing is charged
        for it again."""
        path = f"/v1/dunning/invoices/{seg(invoice_id)}/cancel"
        return self._post(InvoiceOut, path, {"reason": reason}, idempotency_key)

    def payment_method_updated(
        self, invoice_id: str, *, idempotency_key: str | None = None
    ) -> InvoiceOut:
        path = f"/v1/dunning/invoices/{seg(invoice_id)}/payment-method-updated"
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
        path = f"/v1/dunning/invoices/{seg(invoice_id)}/attempts/{attempt}/outcome"
        payload = {"outcome": outcome, "decline_code": decline_code, "advice_code": advice_code}
        return self._post(InvoiceOut, path, payload, idempotency_key)

    # Customers

    def get_customer(self, customer_id: str) -> CustomerOut:
        """Who Recoup writes to, and the customer's access state (`access`)."""
        return self._get(CustomerOut, f"/v1/dunning/customers/{seg(customer_id)}")

    def put_customer(
        self,
        customer_id: str,
        *,
        email: str | None = None,
        name: str | None = None,
        locale: str | None = None,
    ) -> CustomerOut:
        """Set the customer's address, name or locale (None: kept); a new address clears a
        suppression of the old one."""
        payload = {"email": email, "name": name, "locale": locale}
        path = f"/v1/dunning/customers/{seg(customer_id)}"
        return self._put_json(
            CustomerOut, path, {k: v for k, v in payload.items() if v is not None}
        )

    def customer_payment_method_updated(
        self,
        customer_id: str,
        *,
        exp_month: int | None = None,
        exp_year: int | None = None,
        idempotency_key: str | None = None,
    ) -> CardUpdateOut:
        """The customer has a new card: needless reminders cancelled, open invoices
        re-planned on it."""
        payload: dict[str, Any] = {}
        if exp_month is not None or exp_year is not None:
            payload["card"] = {"exp_month": exp_month, "exp_year": exp_year}
        path = f"/v1/dunning/customers/{seg(customer_id)}/payment-method-updated"
        return self._post(CardUpdateOut, path, payload, idempotency_key)

    def tell_renewal(
        self,
        *,
        customer_id: str,
        renews_at: datetime | str,
        amount: int,
        currency: str,
        timezone: str,
        exp_month: int | None = None,
        exp_year: int | None = None,
        customer_email: str | None = None,
        customer_name: str | None = None,
        locale: str | None = None,
        idempotency_key: str | None = None,
    ) -> RenewalOut:
        """Tell Recoup of an upcoming renewal: a card_expiring reminder when the card will
        have expired by then."""
        payload: dict[str, Any] = {
            "customer_id": customer_id,
            "renews_at": instant("renews_at", renews_at),
            "amount": amount,
            "currency": currency,
            "timezone": timezone,
        }
        if exp_month is not None or exp_year is not None:
            payload["card"] = {"exp_month": exp_month, "exp_year": exp_year}
        optional = {
            "customer_email": customer_email,
            "customer_name": customer_name,
            "locale": locale,
        }
        payload.update({k: v for k, v in optional.items() if v is not None})
        return self._post(RenewalOut, "/v1/dunning/renewals", payload, idempotency_key)

    def dunning_settings(self) -> SettingsOut:
        return self._get(SettingsOut, "/v1/dunning/settings")

    def configure_dunning(
        self,
        *,
        policy: str | None = None,
        event_url: str | None = None,
        charge_url: str | None = None,
        experiment_name: str | None = None,
        experiment_policy: str | None = None,
        experiment_share: float | None = None,
        default_timezone: str | None = None,
        stripe_webhook_secret: str | None = None,
        charge_with: str | None = None,
        stripe_api_key: str | None = None,
        smtp_url: str | None = None,
        email_from: str | None = None,
        reply_to: str | None = None,
        update_card_url: str | None = None,
        email_templates: str | None = None,
        allow_unsubscribe: bool = False,
    ) -> SettingsOut:
        """Replace the tenant's settings (what is not given is cleared). A policy experiment
        takes its three settings together: `experiment_policy` (TOML, arm b) is used for the
        share `experiment_share` of new invoices, split by `experiment_name`. The Stripe
        intake's endpoint secret is write-only: given, it is set; not given, it is kept
        (`SettingsOut.stripe_webhook_secret_set` says whether one is). So are `charge_with`
        (`stripe`: Recoup pays the Stripe invoices itself with `stripe_api_key`; `url`: the
        charge endpoint) and the write-only `stripe_api_key`, and the write-only `smtp_url`
        of the customers' emails (`SettingsOut.smtp_configured`); their sender, link
        template, templates and unsubscribe switch are replaced like the rest."""
        payload: dict[str, Any] = {
            "policy": policy,
            "event_url": event_url,
            "charge_url": charge_url,
            "experiment_name": experiment_name,
            "experiment_policy": experiment_policy,
            "experiment_share": experiment_share,
            "default_timezone": default_timezone,
            "email_from": email_from,
            "reply_to": reply_to,
            "update_card_url": update_card_url,
            "email_templates": email_templates,
            "allow_unsubscribe": allow_unsubscribe,
        }
        if stripe_webhook_secret is not None:
            payload["stripe_webhook_secret"] = stripe_webhook_secret
        if charge_with is not None:
            payload["charge_with"] = charge_with
        if stripe_api_key is not None:
            payload["stripe_api_key"] = stripe_api_key
        if smtp_url is not None:
            payload["smtp_url"] = smtp_url
        return self._put_json(SettingsOut, "/v1/dunning/settings", payload)

    # The recovery report

    def recovery_report(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        min_volume: int | None = None,
    ) -> dict[str, Any]:
        """The recovery report (`report_json`'s document, with its window's `since` and
        `until`) of the invoices that failed in [since, until)."""
        params = _report_params(since, until, min_volume)
        document: dict[str, Any] = self._send("GET", REPORT, params=params).json()
        return document

    def recovery_report_html(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        min_volume: int | None = None,
    ) -> str:
        """The same report as one self-contained HTML page."""
        params = {**_report_params(since, until, min_volume), "format": "html"}
        return self._send("GET", REPORT, params=params).text

    def tag_merchant(self, merchant_id: str, tag: str, *, note: str = "") -> TagOut:
        """Tag a merchant id (seasonal, new, other): the review queue leaves it out until its
        data contradicts the tag."""
        path = f"/v1/dunning/merchants/{seg(merchant_id)}/tag"
        return self._put_json(TagOut, path, {"tag": tag, "note": note})

    def untag_merchant(self, merchant_id: str) -> None:
        self._send("DELETE", f"/v1/dunning/merchants/{seg(merchant_id)}/tag")

    def review_queue(self, *, min_volume: int | None = None) -> ReviewQueueOut:
        return self._get(ReviewQueueOut, "/v1/dunning/review-queue", {"min_volume": min_volume})

    def preview_email(self, event: str, *, locale: str | None = None) -> EmailPreviewOut:
        """One customer email of the tenant's (`event`: payment_failed, retry_failed, …),
        rendered with sample data as its settings make it."""
        params = {"event": event, "locale": locale}
        return self._get(EmailPreviewOut, "/v1/dunning/emails/preview", params)

    def clock(self) -> ClockOut:
        """The test clock of a server started with `--clock virtual:…` (404 elsewhere)."""
        return self._get(ClockOut, "/v1/clock")

    def advance_clock(
        self, *, seconds: float | None = None, to: datetime | str | None = None
    ) -> ClockOut:
        """Move the test clock by `seconds` or to `to`; returns once every job due up to then
        has run. Sent as an absolute instant, so a retry after a lost answer moves nothing."""
        if (seconds is None) == (to is None):
            raise ValueError("give seconds or to, not both")
        if to is not None:
            return self._post(ClockOut, "/v1/clock", {"to": instant("to", to)}, None)
        target = self.clock().now + timedelta(seconds=seconds or 0)
        return self._post(ClockOut, "/v1/clock", {"to": target.isoformat()}, None)


REPORT = "/v1/dunning/report"


def _report_params(
    since: datetime | None, until: datetime | None, min_volume: int | None
) -> dict[str, Any]:
    return {
        "since": None if since is None else since.isoformat(),
        "until": None if until is None else until.isoformat(),
        "min_volume": min_volume,
    }


__all__ = ["DunningCalls"]
