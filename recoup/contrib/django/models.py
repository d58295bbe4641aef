"""The receiver's two tables as Django models, mirroring `recoup.receiver`'s own
(`receiver_idempotency_keys`, `receiver_charges`: see recoup/receiver/sqlite.sql), with the
same CHECK constraints, so the rules that keep one consistent keep the other.

- `IdempotencyRecord`: one per request key (`Idempotency-Key`, else `webhook-id`): the body's
  fingerprint, and either the lock of the request in flight (`locked_at`) or the answer it
  gave (`status`, `content_type`, `headers`, `body`), never both.
- `ChargeRecord`: the charge ledger, one per provider key (`charge:{invoice}:{n}`): which
  invoice and attempt, what the provider did (`state`), its charge id and decline codes.

Instants are aware (`USE_TZ = True` is required: the app's checks say so).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from django.db import models

from recoup.payments.provider import ChargeStatus
from recoup.receiver.charging import LedgerEntry
from recoup.receiver.contract import MAX_TEXT_LENGTH

STATES: Final = [(status.value, status.value.replace("_", " ")) for status in ChargeStatus]


class IdempotencyRecord(models.Model):
    """A request key: in flight (`locked_at` set) or completed (its answer stored)."""

    key: models.CharField[str, str] = models.CharField(max_length=MAX_TEXT_LENGTH, primary_key=True)
    fingerprint: models.CharField[str, str] = models.CharField(
        max_length=64, help_text="sha256 of the canonical body"
    )
    created_at: models.DateTimeField[datetime, datetime] = models.DateTimeField(db_index=True)
    locked_at: models.DateTimeField[datetime | None, datetime | None] = models.DateTimeField(
        null=True, blank=True
    )
    status: models.PositiveSmallIntegerField[int | None, int | None] = (
        models.PositiveSmallIntegerField(null=True, blank=True)
    )
    content_type: models.CharField[str | None, str | None] = models.CharField(
        max_length=255, null=True, blank=True
    )
    headers: models.JSONField[dict[str, str], dict[str, str]] = models.JSONField(
        default=dict, blank=True
    )
    body: models.BinaryField[bytes | None, bytes | memoryview | None] = models.BinaryField(
        null=True, blank=True
    )

    class Meta:
        db_table = "recoup_idempotency_records"
        verbose_name = "idempotency record"
        ordering = ("-created_at",)
        constraints = (
            models.CheckConstraint(
                condition=models.Q(locked_at__isnull=True, status__isnull=False)
                | models.Q(locked_at__isnull=False, status__isnull=True),
                name="recoup_idempotency_locked_xor_completed",
            ),
            models.CheckConstraint(
                condition=models.Q(status__isnull=True)
                | models.Q(body__isnull=False, content_type__isnull=False),
                name="recoup_idempotency_completed_has_body",
            ),
        )

    def __str__(self) -> str:
        return self.key

    @property
    def completed(self) -> bool:
        return self.status is not None


class ChargeRecord(models.Model):
    """What became of one provider key: one entry of the charge ledger."""

    charge_key: models.CharField[str, str] = models.CharField(
        max_length=MAX_TEXT_LENGTH, primary_key=True
    )
    invoice_id: models.CharField[str, str] = models.CharField(max_length=MAX_TEXT_LENGTH)
    attempt: models.PositiveIntegerField[int, int] = models.PositiveIntegerField()
    state: models.CharField[str, str] = models.CharField(max_length=16, choices=STATES)
    amount: models.BigIntegerField[int, int] = models.BigIntegerField(help_text="minor units")
    currency: models.CharField[str, str] = models.CharField(max_length=3)
    provider_charge_id: models.CharField[str | None, str | None] = models.CharField(
        max_length=MAX_TEXT_LENGTH, null=True, blank=True
    )
    decline_code: models.CharField[str | None, str | None] = models.CharField(
        max_length=MAX_TEXT_LENGTH, null=True, blank=True
    )
    advice_code: models.CharField[str | None, str | None] = models.CharField(
        max_length=MAX_TEXT_LENGTH, null=True, blank=True
    )
    created_at: models.DateTimeField[datetime, datetime] = models.DateTimeField()
    updated_at: models.DateTimeField[datetime, datetime] = models.DateTimeField()

    class Meta:
        db_table = "recoup_charges"
        verbose_name = "charge"
        ordering = ("invoice_id", "attempt", "charge_key")
        indexes = (models.Index(fields=["invoice_id", "attempt"], name="recoup_charges_invoice"),)
        constraints = (
            models.CheckConstraint(
                condition=models.Q(attempt__gte=1), name="recoup_charges_attempt_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(amount__gt=0), name="recoup_charges_amount_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(state__in=[status.value for status in ChargeStatus]),
                name="recoup_charges_state_known",
            ),
            models.CheckConstraint(
                condition=~models.Q(state=ChargeStatus.SUCCEEDED.value)
                | models.Q(provider_charge_id__isnull=False),
                name="recoup_charges_succeeded_has_charge",
            ),
            models.CheckConstraint(
                condition=models.Q(updated_at__gte=models.F("created_at")),
                name="recoup_charges_updated_after_created",
            ),
        )

    def __str__(self) -> str:
        return self.charge_key

    def entry(self) -> LedgerEntry:
        """This row as the receiver's rules read it."""
        return LedgerEntry(
            charge_key=self.charge_key,
            invoice_id=self.invoice_id,
            attempt=self.attempt,
            state=ChargeStatus(self.state),
            amount=self.amount,
            currency=self.currency,
            provider_charge_id=self.provider_charge_id,
            decline_code=self.decline_code,
            advice_code=self.advice_code,
            created_at=_aware(self.created_at),
            updated_at=_aware(self.updated_at),
        )


def _aware(instant: datetime) -> datetime:
    if instant.tzinfo is None:
        raise ValueError("naive datetime from the database: set USE_TZ = True")
    return instant


__all__ = ["STATES", "ChargeRecord", "IdempotencyRecord"]
