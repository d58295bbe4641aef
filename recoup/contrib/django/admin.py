"""The admin, read-mostly: the charge ledger (by invoice, state, provider charge id; with an
action that reconciles pending charges with the provider) and the idempotency records (which
may be deleted, to let the next delivery of a key run again). Nothing here adds or edits a
row: the ledger is the record of money that moved."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from recoup.contrib.django.conf import (
    INVOICE_BOOK_SETTING,
    PROVIDER_SETTING,
    invoice_book,
    payment_provider,
)
from recoup.contrib.django.models import ChargeRecord, IdempotencyRecord
from recoup.contrib.django.reconciling import Settled, reconcile_pending
from recoup.errors import RecoupError
from recoup.payments.provider import ChargeStatus

PREVIEW_CHARACTERS: Final = 2000  # of a stored answer shown on its page

if TYPE_CHECKING:  # generic in django-stubs only, not at run time
    ChargeAdminBase = admin.ModelAdmin[ChargeRecord]
    IdempotencyAdminBase = admin.ModelAdmin[IdempotencyRecord]
else:
    ChargeAdminBase = IdempotencyAdminBase = admin.ModelAdmin


@admin.register(ChargeRecord)
class ChargeRecordAdmin(ChargeAdminBase):
    list_display = (
        "charge_key",
        "invoice",
        "attempt",
        "state",
        "amount",
        "currency",
        "provider_charge_id",
        "decline_code",
        "advice_code",
        "updated_at",
    )
    list_filter = ("state", "currency")
    search_fields = ("=invoice_id", "=charge_key", "=provider_charge_id")
    date_hierarchy = "created_at"
    ordering = ("-updated_at",)
    actions = ("reconcile",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ChargeRecord | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ChargeRecord | None = None) -> bool:
        return False

    @admin.display(description="invoice", ordering="invoice_id")
    def invoice(self, row: ChargeRecord) -> SafeString:
        """The invoice id, linking to all of its charges."""
        url = reverse("admin:recoup_chargerecord_changelist")
        return format_html(
            '<a href="{}?{}">{}</a>', url, urlencode({"invoice_id": row.invoice_id}), row.invoice_id
        )

    def has_reconcile_permission(self, request: HttpRequest) -> bool:
        configured = all(
            getattr(settings, s, None) for s in (PROVIDER_SETTING, INVOICE_BOOK_SETTING)
        )
        user: Any = request.user
        return configured and bool(user.has_perm("recoup.view_chargerecord"))

    @admin.action(
        description="Ask the provider about the selected pending charges", permissions=["reconcile"]
    )
    def reconcile(self, request: HttpRequest, queryset: QuerySet[ChargeRecord]) -> None:
        keys = list(
            queryset.filter(state=ChargeStatus.PENDING.value).values_list("charge_key", flat=True)
        )
        if not keys:
            self.message_user(request, "None of the selected charges is pending.", messages.INFO)
            return
        try:
            found = reconcile_pending(
                provider=payment_provider(),
                invoices=invoice_book(),
                now=datetime.now(UTC),
                using=queryset.db,
                keys=keys,
            )
        except RecoupError as exc:
            self.message_user(request, f"The provider did not answer: {exc}", messages.ERROR)
            return
        for result in found:
            level = messages.WARNING if result.outcome is Settled.PAID_TWICE else messages.SUCCESS
            said = f"Invoice {result.invoice_id}, attempt {result.attempt} ({result.charge_key})"
            self.message_user(request, f"{said}: {result.outcome.value}", level)


class StateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("completed", "completed"), ("in_flight", "in flight")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "completed":
            return queryset.filter(status__isnull=False)
        if self.value() == "in_flight":
            return queryset.filter(status__isnull=True)
        return queryset


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(IdempotencyAdminBase):
    list_display = ("key", "state", "status", "content_type", "created_at", "locked_at")
    list_filter = (StateFilter,)
    search_fields = ("key",)
    date_hierarchy = "created_at"
    exclude = ("body",)
    readonly_fields = ("answer",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: IdempotencyRecord | None = None
    ) -> bool:
        return False

    @admin.display(description="state")
    def state(self, row: IdempotencyRecord) -> str:
        return "completed" if row.completed else "in flight"

    @admin.display(description="stored answer")
    def answer(self, row: IdempotencyRecord) -> str:
        if row.body is None:
            return "(none yet: the delivery is in flight)"
        text = bytes(row.body).decode("utf-8", "replace")
        more = len(text) > PREVIEW_CHARACTERS
        return text[:PREVIEW_CHARACTERS] + ("…" if more else "")


__all__ = ["ChargeRecordAdmin", "IdempotencyRecordAdmin", "StateFilter"]
