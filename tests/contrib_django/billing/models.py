"""The billing app's own tables."""

from __future__ import annotations

from typing import Any

from django.db import models

from recoup.receiver import Invoice as RecoupInvoice


class Invoice(models.Model):
    id: Any = models.CharField(max_length=64, primary_key=True)
    customer_id: Any = models.CharField(max_length=64)
    amount: Any = models.BigIntegerField()  # minor units
    currency: Any = models.CharField(max_length=3, default="usd")
    card: Any = models.CharField(max_length=64, null=True)
    status: Any = models.CharField(max_length=8, default="open")  # open | paid
    paid_charge_id: Any = models.CharField(max_length=64, null=True)

    def as_recoup_invoice(self) -> RecoupInvoice:
        return RecoupInvoice(
            id=self.id,
            customer_id=self.customer_id,
            amount=self.amount,
            currency=self.currency,
            card=self.card,
            is_open=self.status == "open",
        )


class Delivered(models.Model):
    """One run of the webhook view: the tests count these."""

    message_id: Any = models.CharField(max_length=255)
    key: Any = models.CharField(max_length=255)
    payload: Any = models.JSONField()
