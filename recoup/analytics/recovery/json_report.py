"""`report_json`: the report as plain JSON values, with stable keys (the dataclass fields, in
order) and instants as ISO 8601 text."""

from __future__ import annotations

import dataclasses
from datetime import date, datetime
from typing import Any

from recoup.analytics.recovery.report import RecoveryReport

SCHEMA = "recoup.recovery-report/1"


def report_json(report: RecoveryReport) -> dict[str, Any]:
    """The report as a dict that `json.dumps` takes as is (no `default=` needed)."""
    fields = dataclasses.fields(report)
    return {"schema": SCHEMA, **{f.name: _plain(getattr(report, f.name)) for f in fields}}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


__all__ = ["SCHEMA", "report_json"]
