"""Fuzzing the time core's parsers: a cron expression, an instant and an anchor's fields, given
as any text (or any datetime), are parsed and evaluated or refused with `InvalidInput`; never
another exception. Evaluated at any instant, near year 1 and 9999 too, a cron expression or an
anchor gives its next instants in order, an end of the series, or `InvalidInput`."""

from __future__ import annotations

import contextlib
import io
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recoup.cli import main
from recoup.errors import InvalidInput
from recoup.timekeeping.cron import ALIASES, follows_clock, iter_cron, validate_cron
from recoup.timekeeping.instants import parse_instant
from recoup.timekeeping.recurrence import (
    END_OF_MONTH_RULES,
    EVERY,
    Anchor,
    first_after,
    occurrence_at,
)
from tests.fuzz.strategies import cron_expressions

ZONES = st.sampled_from(
    [
        *["UTC", "America/Los_Angeles", "Pacific/Kiritimati", "Pacific/Apia", "Europe/London"],
        *["Asia/Kathmandu", "America/St_Johns", "Antarctica/Troll", "Etc/GMT+12", "Etc/GMT-14"],
    ]
)
# Any aware instant datetime can hold, the ends included.
INSTANTS = st.datetimes(timezones=st.just(UTC)) | st.sampled_from(
    [datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)]
)
TOKENS = st.sampled_from(
    [
        *["*", "*/5", "0", "59", "60", "-1", "1-5", "5-1", "1,2", ",", "L", "LW", "5L", "1#2"],
        *["1#6", "W", "15W", "JAN", "jan-mar", "MON-FRI", "sun", "?", "9" * 30, "9" * 5000],
        *["\x00", "\u0660"],
    ]
)
CRON_TEXTS = st.one_of(
    cron_expressions(),
    st.lists(TOKENS, max_size=7).map(" ".join),
    st.sampled_from(sorted(ALIASES)).map(str.upper),
    st.text(max_size=30),
)


def evaluate(expression: str, timezone: str, after: datetime, count: int = 3) -> None:
    """The first `count` instants after `after`: later each time, or the series' end."""
    previous = after
    try:
        for at, _ in zip(iter_cron(expression, timezone, after), range(count), strict=False):
            assert at > previous and at.tzinfo is UTC
            previous = at
    except InvalidInput as exc:
        assert exc.field == "after"


@settings(max_examples=400, deadline=None)
@given(expression=CRON_TEXTS)
def test_any_cron_text_is_canonical_or_refused_naming_the_field(expression: str) -> None:
    try:
        canonical = validate_cron(expression, field="rule.cron")
    except InvalidInput as exc:
        assert exc.field == "rule.cron"
        return
    assert validate_cron(canonical) == canonical  # canonical is a fixed point
    follows_clock(canonical)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=cron_expressions(), timezone=ZONES, after=INSTANTS)
def test_a_cron_expression_evaluates_at_any_instant(
    expression: str, timezone: str, after: datetime
) -> None:
    evaluate(expression, timezone, after)


@pytest.mark.parametrize(
    ("expression", "timezone", "after"),
    [
        # Past year 9999: OverflowError from cronsim, or converting its answer to UTC.
        ("0 0 29 2 *", "UTC", datetime(9999, 12, 1, tzinfo=UTC)),
        ("* * * * *", "Pacific/Kiritimati", datetime(9999, 12, 31, 23, 59, tzinfo=UTC)),
        # Within hours of year 1 in a zone behind UTC: the local reading overflowed.
        ("* * * * *", "America/Los_Angeles", datetime(1, 1, 1, tzinfo=UTC)),
    ],
)
def test_found_by_fuzzing_the_ends_of_time_end_the_series_or_refuse(
    expression: str, timezone: str, after: datetime
) -> None:
    evaluate(expression, timezone, after)


@pytest.mark.parametrize(
    ("local", "after"),
    [
        # An instant within hours of year 9999 read in a zone ahead of UTC: OverflowError.
        (datetime(2026, 1, 31, 9), datetime.max.replace(tzinfo=UTC)),
        (datetime(9999, 12, 1), datetime(9999, 12, 31, 20, tzinfo=UTC)),
        # ... of year 1 in a zone behind it (Kiritimati's local mean time was −10:29).
        (datetime(2026, 1, 31, 9), datetime.min.replace(tzinfo=UTC)),
    ],
)
@pytest.mark.parametrize("timezone", ["Pacific/Kiritimati", "America/Los_Angeles"])
def test_found_by_fuzzing_the_first_renewal_after_the_ends_of_time(
    local: datetime, after: datetime, timezone: str
) -> None:
    anchor = Anchor(local=local, timezone=timezone, every="day")
    try:
        found = first_after(anchor, after)
    except InvalidInput as exc:  # the series ended before `after`
        assert exc.field == "instant"
    else:
        assert found.at > after


def test_found_by_fuzzing_a_number_too_long_to_read_is_refused() -> None:
    # int() refuses more than 4,300 digits with a ValueError, which cronsim let through.
    with pytest.raises(InvalidInput):
        validate_cron("9" * 5000 + " * * * *")


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=40) | INSTANTS.map(datetime.isoformat))
def test_any_text_is_an_instant_in_range_or_refused(text: str) -> None:
    try:
        instant = parse_instant("--failed-at", text)
    except InvalidInput as exc:
        assert exc.field == "--failed-at"
    else:
        assert instant.tzinfo is UTC and 1970 <= instant.year <= 9000


ANCHOR_FIELDS = {
    "local": st.datetimes() | st.sampled_from([datetime.min, datetime.max]),
    "timezone": ZONES | st.text(max_size=12) | st.sampled_from(["localtime", "../UTC", ""]),
    "every": st.sampled_from(EVERY) | st.text(max_size=6),
    "interval": st.integers(-2, 40) | st.integers() | st.booleans(),
    "end_of_month": st.sampled_from(END_OF_MONTH_RULES) | st.text(max_size=6),
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fields=st.fixed_dictionaries(ANCHOR_FIELDS),
    n=st.integers(0, 50) | st.integers(),
    after=INSTANTS,
)
def test_any_anchor_is_refused_or_gives_its_renewals(
    fields: dict[str, object], n: int, after: datetime
) -> None:
    try:
        anchor = Anchor(**fields)  # type: ignore[arg-type]
    except InvalidInput as exc:
        assert exc.field in ANCHOR_FIELDS
        return
    for step in (lambda: occurrence_at(anchor, n), lambda: first_after(anchor, after)):
        try:
            found = step()
        except InvalidInput as exc:
            assert exc.field in ("n", "instant", "after", "local")
        else:
            assert found.at.tzinfo is UTC


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    anchor=st.text(max_size=25) | st.datetimes().map(datetime.isoformat),
    timezone=ZONES | st.text(max_size=8),
    interval=st.integers(-1, 10**6).map(str),
)
def test_renewals_from_any_command_line_print_or_refuse_in_one_line(
    anchor: str, timezone: str, interval: str
) -> None:
    args = ["renewals", "--anchor", anchor, "--timezone", timezone, "--interval", interval]
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main([*args, "--json", "--count", "3"])
    assert code in (0, 2), err.getvalue()
    if code == 2:
        lines = err.getvalue().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: --"), lines
