"""Flow control in a policy: how many attempts a second a gateway or a merchant account
receives (the jobs' flow control, `recoup.jobs.flow`, held across every worker).

    [flow]
    by = "merchant"          # "gateway", "merchant" or "gateway+merchant"
    rate = 10                # at most this many attempts start per period (optional)
    period_seconds = 1       # the rate's period (default 1)
    parallelism = 4          # at most this many attempts running at once (optional)

An attempt job has one flow key, so a policy limits one scope: each gateway, each merchant id,
or each pair of them (`key_for`). An invoice without the attribute shares the key of the
others without it. Pure: parsing and naming, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recoup.dunning import policy_fields as fields
from recoup.errors import ConfigError

SCOPES = ("gateway", "merchant", "gateway+merchant")
_KEYS = frozenset({"by", "rate", "period_seconds", "parallelism"})
_MAX_RATE = 100_000
_MAX_PERIOD_SECONDS = 7 * 86_400
_NONE = "-"  # the key part of an invoice without the attribute


@dataclass(frozen=True, kw_only=True)
class FlowLimit:
    """The limit a policy puts on its attempts, per `by` scope."""

    by: str
    rate: int | None = None
    period_seconds: float = 1.0
    parallelism: int | None = None

    def key_for(self, gateway: str | None, merchant_id: str | None) -> str:
        """The flow key of an attempt on `gateway` for `merchant_id`."""
        parts = []
        if self.by in ("gateway", "gateway+merchant"):
            parts.append(f"gateway:{gateway or _NONE}")
        if self.by in ("merchant", "gateway+merchant"):
            parts.append(f"merchant:{merchant_id or _NONE}")
        return "dunning:" + "|".join(parts)


def parse_flow(value: Any) -> FlowLimit | None:
    """The `[flow]` table (absent: None); a `ConfigError` naming `flow.<key>` otherwise."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError("flow", value, "expected a table")
    fields.no_extra(value, _KEYS, prefix="flow.")
    by = value.get("by")
    if isinstance(by, list):
        raise ConfigError(
            "flow.by",
            by,
            f"expected one of {list(SCOPES)}: an attempt job is under one flow key "
            '("gateway+merchant" limits each pair of them)',
        )
    if by not in SCOPES:
        raise ConfigError("flow.by", by, f"expected one of {list(SCOPES)}")
    rate = value.get("rate")
    parallelism = value.get("parallelism")
    if rate is None and parallelism is None:
        raise ConfigError("flow", value, "expected a rate and/or a parallelism")
    return FlowLimit(
        by=by,
        rate=None if rate is None else fields.integer("flow.rate", rate, 1, _MAX_RATE),
        period_seconds=fields.number(
            "flow.period_seconds", value.get("period_seconds", 1), 0.001, _MAX_PERIOD_SECONDS
        ),
        parallelism=None
        if parallelism is None
        else fields.integer("flow.parallelism", parallelism, 1, _MAX_RATE),
    )


__all__ = ["SCOPES", "FlowLimit", "parse_flow"]
