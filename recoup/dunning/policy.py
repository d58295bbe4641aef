"""Dunning policies: TOML → a validated, frozen `DunningPolicy`; the shipped presets.

A policy file (see `recoup/dunning/data/policies/*.toml` for complete examples):

    name = "business-days"
    final_action = "pause_access"   # pause_access | cancel | mark_uncollectible | leave_past_due
    gaps = [{ business_days = 1 }, { business_days = 3 }, { days = 7 }]
    strategy = "static"             # or "adaptive", with an [adaptive] table (policy_adaptive.py)
    paydays = [1, 15]               # optional: insufficient-funds retries aim at paydays;
                                    # or "country" (see policy_paydays.py)

    [window]                        # the local landing window
    start = "10:00"
    jitter_minutes = 90             # 0–719; start + jitter stays on the same local date

    [calendar]
    weekend = ["sat", "sun"]        # used when the country has no weekend of its own
    weekend_from_country = true     # e.g. Friday–Saturday for IL
    default_country = "US"          # holidays when the customer has no country (optional)

    [limits]
    min_gap_hours = 0               # least time between a failure and the retry after it
    max_duration_days = 21          # no attempt later than this after the first failure
    stop_before_renewal = true      # no attempt at or after the next renewal, when known

    [networks]
    visa_max_reattempts_30d = 15
    mastercard_max_per_merchant_amount_30d = 35
    mastercard_max_per_card_per_day = 10

    [flow]                          # optional: attempts per gateway or merchant (policy_flow.py)
    by = "merchant"
    rate = 10

    [[blackouts]]                   # a gateway's maintenance: no attempt inside [start, end)
    gateway = "stripe"
    start = 2026-07-01T02:00:00Z
    end = 2026-07-01T04:00:00Z

    [messages]                      # customer emails (`policy_messages.py`: every key)
    send = ["payment_failed", "retry_failed", "final_warning", "recovered", "exhausted"]
    window_start = "08:00"          # the customer's local daytime window for sending
    window_end = "20:00"

    [access]                        # the customer's access state (`policy_access.py`)
    grace_days = 7                  # days in grace after the failure, then restricted

Every key is checked; an error is a `ConfigError` whose field is the dotted path
(`gaps[2].business_days`, `window.start`). Parsing is pure: callers read files themselves.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, time
from importlib import resources
from typing import Any

from recoup.dunning import policy_fields as fields
from recoup.dunning.policy_access import AccessPolicy, access_from_dict
from recoup.dunning.policy_adaptive import AdaptiveSettings, parse_adaptive
from recoup.dunning.policy_flow import FlowLimit, parse_flow
from recoup.dunning.policy_messages import MessagePolicy, messages_from_dict
from recoup.dunning.policy_paydays import Paydays, parse_paydays
from recoup.errors import ConfigError, InvalidInput
from recoup.timekeeping.calendar import SAT_SUN, WEEKDAY_NAMES, parse_weekend

PRESETS = ("business-days", "calendar", "adaptive")
DEFAULT_PRESET = "business-days"

_MAX_GAP = 60  # days (calendar or business) in one step
_MAX_GAPS = 30  # attempts in one policy
_HH_MM = re.compile(r"[0-2][0-9]:[0-5][0-9]")  # window.start; time() refuses 24:00 and on
_MAX_JITTER = 719  # minutes: the window must end less than 12 h after it starts (planner rule)
_SECONDS_PER_DAY = 86_400


class GapUnit(enum.Enum):
    DAYS = "days"
    BUSINESS_DAYS = "business_days"


class FinalAction(enum.Enum):
    """What happens to the subscription after the last planned attempt fails."""

    PAUSE_ACCESS = "pause_access"
    CANCEL = "cancel"
    MARK_UNCOLLECTIBLE = "mark_uncollectible"
    LEAVE_PAST_DUE = "leave_past_due"


@dataclass(frozen=True, kw_only=True)
class Gap:
    """The distance from the failure that precedes an attempt to the attempt's local date."""

    count: int
    unit: GapUnit


@dataclass(frozen=True, kw_only=True)
class Blackout:
    """A gateway's maintenance window: no attempt on `gateway` in [start, end) (UTC)."""

    gateway: str
    start: datetime
    end: datetime


@dataclass(frozen=True, kw_only=True)
class NetworkLimits:
    """Card-network reattempt limits, per card across invoices.

    Visa: at most `visa_max_reattempts_30d` reattempts per card in any 30 days for decline
    categories 2–4 (15 is what most processors still enforce; Visa raised it to 20 in May 2025).
    Mastercard: at most 35 attempts per card, merchant and amount in 30 days, 10 per card in any
    24 hours.
    """

    visa_max_reattempts_30d: int = 15
    mastercard_max_per_merchant_amount_30d: int = 35
    mastercard_max_per_card_per_day: int = 10


@dataclass(frozen=True, kw_only=True)
class DunningPolicy:
    """A validated dunning policy (see the module docstring for the file format)."""

    name: str
    gaps: tuple[Gap, ...]
    window_start: time = time(10, 0)
    jitter_minutes: int = 90
    weekend: frozenset[int] = SAT_SUN
    weekend_from_country: bool = True
    default_country: str | None = None
    min_gap_hours: float = 0.0
    max_duration_days: int = 21
    stop_before_renewal: bool = True
    networks: NetworkLimits = field(default_factory=NetworkLimits)
    adaptive: AdaptiveSettings | None = None  # strategy = "adaptive" (policy_adaptive.py)
    blackouts: tuple[Blackout, ...] = ()
    final_action: FinalAction = FinalAction.PAUSE_ACCESS
    description: str = ""
    paydays: Paydays | None = None  # insufficient-funds retries aim at these (policy_paydays)
    messages: MessagePolicy = field(default_factory=MessagePolicy)
    access: AccessPolicy = field(default_factory=AccessPolicy)
    flow: FlowLimit | None = None  # attempts a second per gateway or merchant (policy_flow)

    @property
    def window_start_seconds(self) -> int:
        """Seconds after local midnight at which the landing window opens."""
        return self.window_start.hour * 3600 + self.window_start.minute * 60

    @property
    def jitter_span_seconds(self) -> int:
        """Jitter is a whole number of seconds in [0, span]."""
        return self.jitter_minutes * 60

    @property
    def min_gap_seconds(self) -> int:
        return round(self.min_gap_hours * 3600)

    @property
    def max_duration_seconds(self) -> int:
        return self.max_duration_days * _SECONDS_PER_DAY

    @functools.cached_property
    def fingerprint(self) -> bytes:
        """16 bytes naming the policy's timing (gaps, window start, jitter span): its part of
        the jitter hash. Names, limits, blackouts and the final action are left out on purpose,
        so a renamed copy of a preset plans the same instants, and adding a blackout does not
        move every other invoice's minute."""
        timing = {
            "gaps": [[g.count, g.unit.value] for g in self.gaps],
            "window_start": self.window_start.strftime("%H:%M"),
            "jitter_minutes": self.jitter_minutes,
        }
        text = json.dumps(timing, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).digest()[:16]

    def blackouts_for(self, gateway: str | None) -> tuple[Blackout, ...]:
        if not gateway:
            return ()
        return tuple(b for b in self.blackouts if b.gateway == gateway)


# ---- validation -------------------------------------------------------------------------------


def _gaps(value: Any) -> tuple[Gap, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(
            "gaps", value, "expected a non-empty array such as [{ business_days = 1 }]"
        )
    if len(value) > _MAX_GAPS:
        raise ConfigError("gaps", f"{len(value)} gaps", f"expected at most {_MAX_GAPS}")
    gaps: list[Gap] = []
    units = {u.value: u for u in GapUnit}
    for i, raw in enumerate(value):
        path = f"gaps[{i}]"
        if not isinstance(raw, dict) or len(raw) != 1:
            raise ConfigError(
                path, raw, "expected exactly one of { days = N } or { business_days = N }"
            )
        ((key, count),) = raw.items()
        if key not in units:
            raise ConfigError(f"{path}.{key}", count, "expected the key days or business_days")
        count = fields.integer(f"{path}.{key}", count, 1, _MAX_GAP)
        gaps.append(Gap(count=count, unit=units[key]))
    return tuple(gaps)


def _window_start(value: Any) -> time:
    try:
        # ASCII digits only: int() also reads "+1" and other scripts' digits ("١٠").
        if not isinstance(value, str) or not _HH_MM.fullmatch(value):
            raise ValueError
        parsed = time(int(value[:2]), int(value[3:]))
    except ValueError:
        raise ConfigError(
            "window.start", value, 'expected a local time HH:MM, e.g. "10:00"'
        ) from None
    return parsed


def _blackouts(value: Any) -> tuple[Blackout, ...]:
    if not isinstance(value, list):
        raise ConfigError("blackouts", value, "expected an array of tables ([[blackouts]])")
    found: list[Blackout] = []
    for i, raw in enumerate(value):
        path = f"blackouts[{i}]"
        if not isinstance(raw, dict):
            raise ConfigError(path, raw, "expected a table with gateway, start and end")
        fields.no_extra(raw, frozenset({"gateway", "start", "end"}), prefix=f"{path}.")
        for key in ("gateway", "start", "end"):
            if key not in raw:
                raise ConfigError(f"{path}.{key}", None, "is required")
        start = fields.instant(f"{path}.start", raw["start"])
        end = fields.instant(f"{path}.end", raw["end"])
        if end <= start:
            raise ConfigError(f"{path}.end", raw["end"], "expected an instant after start")
        found.append(
            Blackout(gateway=fields.text(f"{path}.gateway", raw["gateway"]), start=start, end=end)
        )
    return tuple(found)


_TOP = frozenset(
    {
        "name",
        "description",
        "final_action",
        "gaps",
        "window",
        "strategy",
        "adaptive",
        "calendar",
        "limits",
        "networks",
        "blackouts",
        "paydays",
        "messages",
        "access",
        "flow",
    }
)


def policy_from_dict(data: dict[str, Any], *, name: str) -> DunningPolicy:
    """Validate already-parsed TOML data; `name` is used when the data has none."""
    fields.no_extra(data, _TOP)
    window = fields.table(data, "window", frozenset({"start", "jitter_minutes"}))
    calendar = fields.table(
        data, "calendar", frozenset({"weekend", "weekend_from_country", "default_country"})
    )
    limits = fields.table(
        data, "limits", frozenset({"min_gap_hours", "max_duration_days", "stop_before_renewal"})
    )
    networks = fields.table(
        data,
        "networks",
        frozenset(
            {
                "visa_max_reattempts_30d",
                "mastercard_max_per_merchant_amount_30d",
                "mastercard_max_per_card_per_day",
            }
        ),
    )
    if "gaps" not in data:
        raise ConfigError("gaps", None, "is required, e.g. gaps = [{ business_days = 1 }]")
    window_start = _window_start(window.get("start", "10:00"))
    jitter = fields.integer(
        "window.jitter_minutes", window.get("jitter_minutes", 90), 0, _MAX_JITTER
    )
    if window_start.hour * 60 + window_start.minute + jitter >= 24 * 60:
        raise ConfigError(
            "window.jitter_minutes", jitter, "expected the window to end before local midnight"
        )
    weekend_names = calendar.get("weekend", [WEEKDAY_NAMES[d] for d in sorted(SAT_SUN)])
    if not isinstance(weekend_names, list):
        raise ConfigError("calendar.weekend", weekend_names, "expected an array of weekday names")
    try:
        weekend = parse_weekend("calendar.weekend", weekend_names)
    except InvalidInput as exc:
        raise ConfigError(exc.field, exc.value, exc.allowed) from None
    try:
        final_action = FinalAction(data.get("final_action", "pause_access"))
    except ValueError:
        raise ConfigError(
            "final_action",
            data.get("final_action"),
            f"expected one of {[a.value for a in FinalAction]}",
        ) from None
    defaults = NetworkLimits()
    return DunningPolicy(
        name=fields.text("name", data.get("name", name)),
        description=str(data.get("description", "")),
        adaptive=parse_adaptive(data.get("strategy"), data.get("adaptive")),
        gaps=_gaps(data["gaps"]),
        window_start=window_start,
        jitter_minutes=jitter,
        weekend=weekend,
        weekend_from_country=fields.boolean(
            "calendar.weekend_from_country", calendar.get("weekend_from_country", True)
        ),
        default_country=fields.country("calendar.default_country", calendar.get("default_country")),
        min_gap_hours=fields.number(
            "limits.min_gap_hours", limits.get("min_gap_hours", 0), 0, 24 * 60
        ),
        max_duration_days=fields.integer(
            "limits.max_duration_days", limits.get("max_duration_days", 21), 1, 366
        ),
        stop_before_renewal=fields.boolean(
            "limits.stop_before_renewal", limits.get("stop_before_renewal", True)
        ),
        networks=NetworkLimits(
            visa_max_reattempts_30d=fields.integer(
                "networks.visa_max_reattempts_30d",
                networks.get("visa_max_reattempts_30d", defaults.visa_max_reattempts_30d),
                0,
                1000,
            ),
            mastercard_max_per_merchant_amount_30d=fields.integer(
                "networks.mastercard_max_per_merchant_amount_30d",
                networks.get(
                    "mastercard_max_per_merchant_amount_30d",
                    defaults.mastercard_max_per_merchant_amount_30d,
                ),
                0,
                1000,
            ),
            mastercard_max_per_card_per_day=fields.integer(
                "networks.mastercard_max_per_card_per_day",
                networks.get(
                    "mastercard_max_per_card_per_day", defaults.mastercard_max_per_card_per_day
                ),
                0,
                1000,
            ),
        ),
        blackouts=_blackouts(data.get("blackouts", [])),
        final_action=final_action,
        paydays=parse_paydays(data.get("paydays")),
        messages=messages_from_dict(data),
        access=access_from_dict(data),
        flow=parse_flow(data.get("flow")),
    )


def parse_policy(text: str, *, name: str = "custom") -> DunningPolicy:
    """Parse and validate a policy from TOML text; `ConfigError` names the field at fault."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("policy", str(exc), "expected valid TOML") from None
    except RecursionError:  # tomllib recurses once per level of nested arrays and tables
        raise ConfigError(
            "policy", "arrays or tables nested too deeply", "expected valid TOML"
        ) from None
    return policy_from_dict(data, name=name)


def preset_text(name: str) -> str:
    """The TOML text of a shipped preset, as the package holds it."""
    if name not in PRESETS:
        raise InvalidInput("policy", name, f"expected one of {list(PRESETS)} or a TOML file")
    path = resources.files("recoup.dunning").joinpath(f"data/policies/{name}.toml")
    return path.read_text("utf-8")


@functools.cache
def preset(name: str) -> DunningPolicy:
    """A shipped preset: `business-days` (the default), `calendar` or `adaptive`."""
    return parse_policy(preset_text(name), name=name)


def resolve_policy_text(source: str, read_text: Callable[[str], str]) -> tuple[str, DunningPolicy]:
    """The TOML text and the validated policy of a preset by name, else of the TOML file
    `source` read with the caller's `read_text` (the caller owns the I/O). The text is kept as
    given, so whoever stores it stores what the user wrote; `ConfigError` names the field."""
    if source in PRESETS:
        return preset_text(source), preset(source)
    text = read_text(source)
    return text, parse_policy(text, name=source)


__all__ = [
    "DEFAULT_PRESET",
    "PRESETS",
    "Blackout",
    "DunningPolicy",
    "FinalAction",
    "Gap",
    "GapUnit",
    "NetworkLimits",
    "parse_policy",
    "policy_from_dict",
    "preset",
    "preset_text",
    "resolve_policy_text",
]
