"""The one mapping between the dunning records (invoices, their attempts and events, per-tenant
settings) and table rows, shared by both backends: column orders, the `{…_columns}` expansions
of each backend's dunning_queries.sql, and the encoding and decoding of rows, instants through
the backend's codec given as an argument (as in `job_rows`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from recoup.dunning.attempt_timing import AttemptTiming
from recoup.dunning.invoice import (
    AttemptRecord,
    AttemptState,
    Invoice,
    InvoiceEvent,
    InvoiceState,
)
from recoup.recovery.store import DunningSettings, MerchantTag
from recoup.storage.job_rows import DecodeInstant, EncodeInstant, dumps

# Column order of the queries that return invoices, attempts, events and settings (the
# `{…_columns}` placeholders of dunning_queries.sql).
INVOICE_COLUMNS = (
    "tenant",
    "invoice_id",
    "customer_id",
    "amount",
    "currency",
    "failed_at",
    "timezone",
    "country",
    "decline_code",
    "advice_code",
    "card_fingerprint",
    "card_network",
    "gateway",
    "merchant_id",
    "charge_url",
    "policy",
    "state",
    "decision",
    "reason",
    "final_action",
    "recovered_by",
    "version",
    "created_at",
    "updated_at",
)
# An attempt's own columns (its invoice's key comes with the invoice's columns).
ATTEMPT_COLUMNS = (
    "attempt",
    "at",
    "state",
    "job_id",
    "decline_code",
    "advice_code",
    "reported_at",
    "timing_arm",  # 0016: the adaptive decision behind the attempt (`AttemptTiming`)
    "timing_slot",
    "timing_static_slot",
    "timing_propensity",
    "timing_explanation",
    "timing_figures",
)
EVENT_COLUMNS = ("id", "tenant", "invoice_id", "seq", "type", "at", "data")
SETTINGS_COLUMNS = (
    "tenant",
    "policy_toml",
    "event_url",
    "charge_url",
    "updated_at",
    "experiment_name",
    "experiment_policy_toml",
    "experiment_share",
)
TAG_COLUMNS = ("merchant_id", "tag", "note", "tagged_at")


def _listed(columns: Sequence[str], prefix: str = "") -> str:
    return ", ".join(prefix + column for column in columns)


EXPANSIONS = {
    "{invoice_columns}": _listed(INVOICE_COLUMNS),
    "{p_invoice_columns}": _listed(INVOICE_COLUMNS, "p."),
    "{i_invoice_columns}": _listed(INVOICE_COLUMNS, "i."),
    "{attempt_columns}": _listed(ATTEMPT_COLUMNS),
    "{a_attempt_columns}": _listed(ATTEMPT_COLUMNS, "a."),
    "{event_columns}": _listed(EVENT_COLUMNS),
    "{settings_columns}": _listed(SETTINGS_COLUMNS),
    "{tag_columns}": _listed(TAG_COLUMNS),
}


def _json(value: Any) -> Any:
    # SQLite returns JSON as text, and so does PostgreSQL's jsonb through the store's loaders.
    return json.loads(value) if isinstance(value, str | bytes) else value


# Records → rows (the named parameters of the queries)


def invoice_values(invoice: Invoice, encode: EncodeInstant) -> dict[str, Any]:
    return {
        "tenant": invoice.tenant,
        "invoice_id": invoice.invoice_id,
        "customer_id": invoice.customer_id,
        "amount": invoice.amount,
        "currency": invoice.currency,
        "failed_at": encode(invoice.failed_at),
        "timezone": invoice.timezone,
        "country": invoice.country,
        "decline_code": invoice.decline_code,
        "advice_code": invoice.advice_code,
        "card_fingerprint": invoice.card_fingerprint,
        "card_network": invoice.card_network,
        "gateway": invoice.gateway,
        "merchant_id": invoice.merchant_id,
        "charge_url": invoice.charge_url,
        "policy": invoice.policy,
        "state": invoice.state.value,
        "decision": invoice.decision,
        "reason": invoice.reason,
        "final_action": invoice.final_action,
        "recovered_by": invoice.recovered_by,
        "version": invoice.version,
        "created_at": encode(invoice.created_at),
        "updated_at": encode(invoice.updated_at),
    }


def attempt_values(
    invoice: Invoice, attempt: AttemptRecord, encode: EncodeInstant
) -> dict[str, Any]:
    return {
        "tenant": invoice.tenant,
        "invoice_id": invoice.invoice_id,
        "attempt": attempt.attempt,
        "at": encode(attempt.at),
        "state": attempt.state.value,
        "job_id": attempt.job_id,
        "decline_code": attempt.decline_code,
        "advice_code": attempt.advice_code,
        "reported_at": None if attempt.reported_at is None else encode(attempt.reported_at),
        **timing_values(attempt.timing),
    }


def timing_values(timing: AttemptTiming | None) -> dict[str, Any]:
    """The timing_* columns of an attempt (all None under a static policy)."""
    if timing is None:
        return {f"timing_{name}": None for name in _TIMING_FIELDS}
    return {
        "timing_arm": timing.arm,
        "timing_slot": timing.slot,
        "timing_static_slot": timing.static_slot,
        "timing_propensity": timing.propensity,
        "timing_explanation": timing.explanation,
        "timing_figures": dumps(dict(timing.figures)),
    }


_TIMING_FIELDS = ("arm", "slot", "static_slot", "propensity", "explanation", "figures")


def event_values(event: InvoiceEvent, encode: EncodeInstant) -> dict[str, Any]:
    return {
        "id": event.id,
        "tenant": event.tenant,
        "invoice_id": event.invoice_id,
        "seq": event.seq,
        "type": event.type,
        "at": encode(event.at),
        "data": dumps(event.data),
    }


# Rows → records


def attempt_from_row(row: Sequence[Any], instant: DecodeInstant) -> AttemptRecord:
    """A row in `ATTEMPT_COLUMNS` order."""
    attempt, at, state, job_id, decline_code, advice_code, reported_at = row[:7]
    arm, slot, static_slot, propensity, explanation, figures = row[7:13]
    timing = None
    if arm is not None:
        timing = AttemptTiming(
            arm=arm,
            slot=slot,
            static_slot=static_slot,
            propensity=float(propensity),
            explanation=explanation,
            figures=_json(figures) or {},
        )
    return AttemptRecord(
        attempt=attempt,
        at=instant(at),
        state=AttemptState(state),
        job_id=job_id,
        decline_code=decline_code,
        advice_code=advice_code,
        reported_at=None if reported_at is None else instant(reported_at),
        timing=timing,
    )


def invoice_from_row(
    row: Sequence[Any], attempts: Iterable[AttemptRecord], instant: DecodeInstant
) -> Invoice:
    """A row in `INVOICE_COLUMNS` order."""
    fields = dict(zip(INVOICE_COLUMNS, row, strict=True))
    for name in ("failed_at", "created_at", "updated_at"):
        fields[name] = instant(fields[name])
    fields["state"] = InvoiceState(fields["state"])
    return Invoice(**fields, attempts=tuple(attempts))


def invoices_from_rows(rows: Iterable[Sequence[Any]], instant: DecodeInstant) -> list[Invoice]:
    """Invoices from the rows of an invoice-`LEFT JOIN`-attempts query ordered by invoice,
    then attempt: one row per attempt (or one with NULL attempt columns)."""
    width = len(INVOICE_COLUMNS)
    invoices: list[Invoice] = []
    head: Sequence[Any] | None = None
    attempts: list[AttemptRecord] = []
    for row in rows:
        if head is None or (row[0], row[1]) != (head[0], head[1]):
            if head is not None:
                invoices.append(invoice_from_row(head, attempts, instant))
            head, attempts = row[:width], []
        if row[width] is not None:
            attempts.append(attempt_from_row(row[width:], instant))
    if head is not None:
        invoices.append(invoice_from_row(head, attempts, instant))
    return invoices


def event_from_row(row: Sequence[Any], instant: DecodeInstant) -> InvoiceEvent:
    """A row in `EVENT_COLUMNS` order."""
    id_, tenant, invoice_id, seq, type_, at, data = row
    return InvoiceEvent(
        id=id_,
        tenant=tenant,
        invoice_id=invoice_id,
        seq=seq,
        type=type_,
        at=instant(at),
        data=_json(data),
    )


def settings_values(settings: DunningSettings, encode: EncodeInstant) -> dict[str, Any]:
    return {
        "tenant": settings.tenant,
        "policy_toml": settings.policy_toml,
        "event_url": settings.event_url,
        "charge_url": settings.charge_url,
        "updated_at": encode(settings.updated_at),
        "experiment_name": settings.experiment_name,
        "experiment_policy_toml": settings.experiment_policy_toml,
        "experiment_share": settings.experiment_share,
    }


def settings_from_row(row: Sequence[Any], instant: DecodeInstant) -> DunningSettings:
    """A row in `SETTINGS_COLUMNS` order."""
    fields = dict(zip(SETTINGS_COLUMNS, row, strict=True))
    fields["updated_at"] = instant(fields["updated_at"])
    return DunningSettings(**fields)


def tag_values(tenant: str, tag: MerchantTag, encode: EncodeInstant) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "merchant_id": tag.merchant_id,
        "tag": tag.tag,
        "note": tag.note,
        "tagged_at": encode(tag.tagged_at),
    }


def tag_from_row(row: Sequence[Any], instant: DecodeInstant) -> MerchantTag:
    """A row in `TAG_COLUMNS` order."""
    merchant_id, tag, note, tagged_at = row
    return MerchantTag(merchant_id=merchant_id, tag=tag, note=note, tagged_at=instant(tagged_at))
