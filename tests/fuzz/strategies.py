"""Hypothesis strategies for the texts the API takes in languages of their own (cron
expressions, dunning policies as TOML), which the OpenAPI document names by `format`; the
schemathesis run registers them for those formats."""

from __future__ import annotations

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


__all__ = ["cron_expressions", "policies"]
