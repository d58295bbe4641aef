"""`report_from_json`: the report again from `report_json`'s document (what GET
/v1/dunning/report answers), so that a report built elsewhere prints through the same
renderers (`recoup report --url` in the terminal).

The document's keys are the dataclass fields, so each value is read by the type its field
declares: nested dataclasses, lists and tuples, dicts (whose keys JSON made text), optional
values, and instants from ISO 8601 text. A document of another shape is `InvalidInput`."""

from __future__ import annotations

import dataclasses
import types
import typing
from datetime import date, datetime
from typing import Any, TypeVar, Union

from recoup.analytics.recovery.json_report import SCHEMA
from recoup.analytics.recovery.report import RecoveryReport
from recoup.errors import InvalidInput

T = TypeVar("T")


def report_from_json(document: dict[str, Any]) -> RecoveryReport:
    """The `RecoveryReport` whose `report_json` is `document` (extra keys, such as the
    API's `since` and `until`, are left aside)."""
    if document.get("schema") != SCHEMA:
        raise InvalidInput("schema", document.get("schema"), f"expected {SCHEMA!r}")
    try:
        return _dataclass(RecoveryReport, document)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput("report", type(exc).__name__, f"a {SCHEMA} document ({exc})") from None


def _read(kind: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(kind) if a is not type(None)]
        return _read(options[0], value) if len(options) == 1 else value
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        return _dataclass(kind, value)
    if origin is list:
        (item,) = typing.get_args(kind)
        return [_read(item, v) for v in value]
    if origin is tuple:
        args = typing.get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_read(args[0], v) for v in value)
        return tuple(_read(a, v) for a, v in zip(args, value, strict=True))
    if origin is dict:
        key, item = typing.get_args(kind)
        return {_read(key, k): _read(item, v) for k, v in value.items()}
    if kind is datetime:
        return datetime.fromisoformat(value)
    if kind is date:
        return date.fromisoformat(value)
    if kind is float:
        return float(value)
    if kind is int:
        return int(value)
    return value


def _dataclass(kind: type[T], value: dict[str, Any]) -> T:
    hints = typing.get_type_hints(kind)
    fields = {
        f.name: _read(hints[f.name], value[f.name])
        for f in dataclasses.fields(kind)  # type: ignore[arg-type]
        if f.init and f.name in value
    }
    return kind(**fields)


__all__ = ["report_from_json"]
