"""Hypothesis strategies for the texts the API takes in languages of their own (cron
expressions, dunning policies as TOML), which the OpenAPI document names by `format`; the
schemathesis run registers them for those formats."""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta, timezone

from hypothesis import strategies as st

from recoup.dunning.policy import PRESETS, preset_text
from recoup.timekeeping.cron import ALIASES

MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


def _field(low: int, high: int, names: list[str] | None = None) -> st.SearchStrategy[str]:
    """One cron field over `low`–`high`: `*`, `*/step`, a value, an ascending range (with a
    step), or a list of those; `names` spell the values from `low` on."""
    value = st.integers(low, high).map(str)
    if names:
        value = value | st.sampled_from(names)
    ascending = st.tuples(st.integers(low, high), st.integers(low, high)).map(sorted)
    ranges = ascending.map(lambda pair: f"{pair[0]}-{pair[1]}")
    step = st.integers(1, high - low + 1).map(str)
    item = st.one_of(
        st.just("*"),
        step.map("*/{}".format),
        value,
        ranges,
        st.tuples(ranges, step).map("/".join),
    )
    return item | st.lists(value | ranges, min_size=2, max_size=3).map(",".join)


@st.composite
def cron_expressions(draw: st.DrawFn) -> str:
    """Expressions `validate_cron` accepts: five fields (a day of month up to 28, which every
    month has), or an alias."""
    if draw(st.integers(0, 5)) == 0:
        return draw(st.sampled_from(sorted(ALIASES)))
    fields = [
        draw(_field(0, 59)),
        draw(_field(0, 23)),
        draw(_field(1, 28)),
        draw(_field(1, 12, MONTHS)),
        draw(_field(0, 6, DAYS)),
    ]
    return " ".join(fields)


def policies() -> st.SearchStrategy[str]:
    """Policies `parse_policy` accepts: the shipped presets, and each with other gaps."""
    presets = [preset_text(name) for name in PRESETS]
    gaps = st.lists(
        st.sampled_from(["{ business_days = 1 }", "{ business_days = 3 }", "{ days = 2 }"]),
        min_size=1,
        max_size=4,
    )
    return st.sampled_from(presets) | st.tuples(st.sampled_from(presets), gaps).map(
        lambda pair: _with_gaps(*pair)
    )


def _with_gaps(text: str, gaps: list[str]) -> str:
    start = text.index("gaps = [")
    end = text.index("]", start) + 1
    return text[:start] + "gaps = [" + ", ".join(gaps) + "]" + text[end:]


# -- TOML documents --------------------------------------------------------------------------


def toml_value(value: object) -> str:
    """`value` as a TOML inline value (tables inline, arrays inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        text = repr(value)
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(text, text)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{_toml_string(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
        )
    raise TypeError(value)


def _toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes of controls are TOML's, and DEL needs one too."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_document(data: dict[str, object]) -> str:
    return "".join(f"{_toml_string(key)} = {toml_value(value)}\n" for key, value in data.items())


# TOML offsets are whole minutes (±HH:MM), as are the instants of a policy.
_OFFSETS = st.integers(-(23 * 60 + 59), 23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)


_SCALARS = st.one_of(
    st.booleans(),
    st.integers(),
    st.integers(-3, 1500),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["10:00", "23:59", "24:00", "1:00", "sat", "sun", "US", "zz", "stripe", ""]),
    st.datetimes(timezones=st.none() | _OFFSETS),
    st.dates(),
    st.times(),
    st.datetimes(timezones=st.sampled_from([timezone(timedelta(hours=14))])),
)
TOML_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6) | st.sampled_from(["days", "business_days"]), inner)
    ),
    max_leaves=6,
)
_POLICY_KEYS = {
    "name": st.text(max_size=6),
    "description": TOML_VALUES,
    "final_action": st.sampled_from(["pause_access", "cancel", "none"]) | TOML_VALUES,
    "gaps": st.lists(
        st.dictionaries(
            st.sampled_from(["days", "business_days", "weeks"]), TOML_VALUES, max_size=2
        ),
        max_size=4,
    )
    | TOML_VALUES,
    "window": st.fixed_dictionaries(
        {}, optional={"start": TOML_VALUES, "jitter_minutes": TOML_VALUES, "x": TOML_VALUES}
    )
    | TOML_VALUES,
    "messages": st.fixed_dictionaries(
        {},
        optional={
            "enabled": TOML_VALUES,
            "send": st.lists(st.sampled_from(["payment_failed", "exhausted", "sms"]), max_size=3)
            | TOML_VALUES,
            "window_start": st.sampled_from(["08:00", "20:00", "8:00", "24:00"]) | TOML_VALUES,
            "window_end": st.sampled_from(["20:00", "07:59", "23:59"]) | TOML_VALUES,
            "card_expiry_days_before": TOML_VALUES,
            "token_days": TOML_VALUES,
        },
    )
    | TOML_VALUES,
    "calendar": st.fixed_dictionaries(
        {},
        optional={
            "weekend": st.lists(st.sampled_from(["sat", "sun", "fri", "mon", "x"]), max_size=8)
            | TOML_VALUES,
            "weekend_from_country": TOML_VALUES,
            "default_country": st.sampled_from(["US", "de", "ZZ", "USA"]) | TOML_VALUES,
        },
    ),
    "limits": st.fixed_dictionaries(
        {},
        optional={
            "min_gap_hours": TOML_VALUES,
            "max_duration_days": TOML_VALUES,
            "stop_before_renewal": TOML_VALUES,
        },
    ),
    "networks": st.dictionaries(
        st.sampled_from(
            [
                "visa_max_reattempts_30d",
                "mastercard_max_per_merchant_amount_30d",
                "mastercard_max_per_card_per_day",
            ]
        ),
        TOML_VALUES,
    ),
    "blackouts": st.lists(
        st.fixed_dictionaries(
            {}, optional={"gateway": TOML_VALUES, "start": TOML_VALUES, "end": TOML_VALUES}
        ),
        max_size=2,
    )
    | TOML_VALUES,
}


@st.composite
def policy_documents(draw: st.DrawFn) -> str:
    """TOML documents shaped like policies: the known keys (each present or not) with values
    near the valid ones or of any TOML type, and now and then an unknown key."""
    data: dict[str, object] = {}
    for key, values in _POLICY_KEYS.items():
        if draw(st.booleans()) or (key == "gaps" and draw(st.integers(0, 4))):
            data[key] = draw(values)
    if draw(st.integers(0, 9)) == 0:
        data[draw(st.text(min_size=1, max_size=5))] = draw(TOML_VALUES)
    return toml_document(data)


__all__ = ["cron_expressions", "policies", "policy_documents", "toml_document", "toml_value"]
