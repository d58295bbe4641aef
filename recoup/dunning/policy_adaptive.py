"""The adaptive strategy of a policy: `strategy = "adaptive"` and its `[adaptive]` table.

    strategy = "adaptive"           # "static" (the default) | "adaptive"

    [adaptive]
    hours_start = "08:00"           # the local hours a learned slot may take: [start, end)
    hours_end = "20:00"
    band_minutes = 60               # the width of a slot's local hour band (15–240, divides 24 h)
    shift_days = 2                  # a slot may be up to this many days before or after the
                                    # static attempt's date (business days only)
    exploration = 0.2               # at most this share of decisions leave the best estimate
    move_confidence = 0.8           # the best estimate leaves the static slot only for a slot
                                    # better with this posterior probability
    prior_strength = 50             # pseudo-attempts a level's prior (its parent's) weighs
    min_attempts = 100              # logged attempts of a decline class before any move
    holdout_share = 0.10            # customers kept on the static policy, to measure uplift
    propensity_draws = 200          # Monte Carlo draws that estimate a decision's propensity

The static policy's own rules stay the guardrails (`adaptive_planner.py`): the adaptive table
only says how far a learned slot may move an attempt inside them. Every key is checked, as in
`policy.py`; a `[adaptive]` table without `strategy = "adaptive"` is refused (it would do
nothing, silently). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import time
from typing import Any

from recoup.dunning import policy_fields as fields
from recoup.errors import ConfigError

STRATEGIES = ("static", "adaptive")
_KEYS = frozenset(
    {
        "hours_start",
        "hours_end",
        "band_minutes",
        "shift_days",
        "exploration",
        "move_confidence",
        "prior_strength",
        "min_attempts",
        "holdout_share",
        "propensity_draws",
    }
)
_MINUTES_PER_DAY = 1440


@dataclass(frozen=True, kw_only=True)
class AdaptiveSettings:
    """How an adaptive policy may move its attempts (keys in the module docstring).

    `hours_start`/`hours_end` are minutes after local midnight, the end exclusive (1440 is
    midnight at the end of the day)."""

    hours_start: int = 8 * 60
    hours_end: int = 20 * 60
    band_minutes: int = 60
    shift_days: int = 2
    exploration: float = 0.2
    move_confidence: float = 0.8
    prior_strength: float = 50.0
    min_attempts: int = 100
    holdout_share: float = 0.10
    propensity_draws: int = 200

    @property
    def bands(self) -> tuple[int, ...]:
        """The start (minutes after local midnight) of each band wholly inside the hours."""
        first = -(-self.hours_start // self.band_minutes) * self.band_minutes
        return tuple(range(first, self.hours_end - self.band_minutes + 1, self.band_minutes))


def _minutes(path: str, value: Any, *, end: bool) -> int:
    allowed = 'expected a local time HH:MM, e.g. "08:00"' + (' (or "24:00")' if end else "")
    if not isinstance(value, str) or len(value) != 5 or value[2] != ":":
        raise ConfigError(path, value, allowed)
    hh, mm = value[:2], value[3:]
    if not (hh.isascii() and hh.isdigit() and mm.isascii() and mm.isdigit()):
        raise ConfigError(path, value, allowed)
    minutes = int(hh) * 60 + int(mm)
    if int(mm) > 59 or minutes > (_MINUTES_PER_DAY if end else _MINUTES_PER_DAY - 1):
        raise ConfigError(path, value, allowed)
    return minutes


def parse_adaptive(strategy: Any, table: Any) -> AdaptiveSettings | None:
    """The adaptive settings of a policy document's `strategy` and `[adaptive]` values (None:
    the static strategy)."""
    chosen = "static" if strategy is None else strategy
    if chosen not in STRATEGIES:
        raise ConfigError("strategy", strategy, f"expected one of {list(STRATEGIES)}")
    if table is None:
        table = {}
    if not isinstance(table, dict):
        raise ConfigError("adaptive", table, "expected a table")
    if chosen == "static":
        if table:
            raise ConfigError("adaptive", table, 'applies only with strategy = "adaptive"')
        return None
    fields.no_extra(table, _KEYS, prefix="adaptive.")
    default = AdaptiveSettings()
    start = _minutes("adaptive.hours_start", table.get("hours_start", "08:00"), end=False)
    end = _minutes("adaptive.hours_end", table.get("hours_end", "20:00"), end=True)
    band = fields.integer("adaptive.band_minutes", table.get("band_minutes", 60), 15, 240)
    if _MINUTES_PER_DAY % band:
        raise ConfigError("adaptive.band_minutes", band, "expected a divisor of 1440 (24 h)")
    settings = AdaptiveSettings(
        hours_start=start,
        hours_end=end,
        band_minutes=band,
        shift_days=fields.integer("adaptive.shift_days", table.get("shift_days", 2), 0, 14),
        exploration=fields.number(
            "adaptive.exploration", table.get("exploration", default.exploration), 0, 1
        ),
        move_confidence=fields.number(
            "adaptive.move_confidence",
            table.get("move_confidence", default.move_confidence),
            0.5,
            0.999,
        ),
        prior_strength=fields.number(
            "adaptive.prior_strength", table.get("prior_strength", default.prior_strength), 1, 1e6
        ),
        min_attempts=fields.integer(
            "adaptive.min_attempts", table.get("min_attempts", default.min_attempts), 0, 10**9
        ),
        holdout_share=fields.number(
            "adaptive.holdout_share", table.get("holdout_share", default.holdout_share), 0, 0.5
        ),
        propensity_draws=fields.integer(
            "adaptive.propensity_draws",
            table.get("propensity_draws", default.propensity_draws),
            10,
            100_000,
        ),
    )
    if not settings.bands:
        raise ConfigError(
            "adaptive.hours_end", table.get("hours_end"), "expected at least one whole band"
        )
    return settings


def format_minutes(minutes: int) -> str:
    """HH:MM of minutes after local midnight (24:00 for the end of the day)."""
    return time(minutes // 60, minutes % 60).strftime("%H:%M") if minutes < 1440 else "24:00"


__all__ = ["STRATEGIES", "AdaptiveSettings", "format_minutes", "parse_adaptive"]
