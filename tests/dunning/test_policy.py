"""Retry policies: the presets, and validation errors that name the dotted field at fault."""

from __future__ import annotations

from datetime import time

import pytest

from recoup.dunning import FinalAction, GapUnit, parse_policy, preset
from recoup.errors import ConfigError, InvalidInput


def test_the_business_days_preset_is_next_business_day_then_three_times_plus_three() -> None:
    policy = preset("business-days")
    assert [(g.count, g.unit) for g in policy.gaps] == [
        (1, GapUnit.BUSINESS_DAYS),
        (3, GapUnit.BUSINESS_DAYS),
        (3, GapUnit.BUSINESS_DAYS),
        (3, GapUnit.BUSINESS_DAYS),
    ]
    assert policy.window_start == time(10, 0)
    assert policy.jitter_minutes == 90
    assert policy.final_action is FinalAction.PAUSE_ACCESS
    assert policy.networks.visa_max_reattempts_30d == 15


def test_the_calendar_preset_is_one_three_five_seven_days() -> None:
    policy = preset("calendar")
    assert [(g.count, g.unit) for g in policy.gaps] == [(n, GapUnit.DAYS) for n in (1, 3, 5, 7)]


def test_an_unknown_preset_is_refused() -> None:
    with pytest.raises(InvalidInput, match="policy"):
        preset("weekly")


def test_a_minimal_policy_takes_the_defaults() -> None:
    policy = parse_policy("gaps = [{ days = 2 }]", name="mine")
    assert policy.name == "mine"
    assert policy.max_duration_days == 21
    assert policy.window_start == time(10, 0)


def test_the_fingerprint_follows_the_timing_not_the_name() -> None:
    base = parse_policy("gaps = [{ days = 2 }]", name="p")
    assert base.fingerprint == parse_policy("gaps = [{ days = 2 }]", name="q").fingerprint
    assert base.fingerprint != parse_policy("gaps = [{ days = 3 }]", name="p").fingerprint
    other_window = parse_policy('gaps = [{ days = 2 }]\n[window]\nstart = "09:00"', name="p")
    assert base.fingerprint != other_window.fingerprint
    other_jitter = parse_policy("gaps = [{ days = 2 }]\n[window]\njitter_minutes = 60", name="p")
    assert base.fingerprint != other_jitter.fingerprint


@pytest.mark.parametrize(
    ("text", "field"),
    [
        # the gaps are required, non-empty, and each is exactly one unit
        ("name = 'x'", "gaps"),
        ("gaps = []", "gaps"),
        ("gaps = [{ days = 1 }, { weeks = 1 }]", "gaps[1].weeks"),
        ("gaps = [{ days = 1, business_days = 2 }]", "gaps[0]"),
        ("gaps = [{ business_days = 0 }]", "gaps[0].business_days"),
        ("gaps = [{ days = 'two' }]", "gaps[0].days"),
        ("gaps = [{ days = true }]", "gaps[0].days"),
        # the window
        ("gaps = [{ days = 1 }]\n[window]\nstart = '25:00'", "window.start"),
        ("gaps = [{ days = 1 }]\n[window]\nstart = '10am'", "window.start"),
        ("gaps = [{ days = 1 }]\n[window]\njitter_minutes = 720", "window.jitter_minutes"),
        (
            "gaps = [{ days = 1 }]\n[window]\nstart = '23:00'\njitter_minutes = 90",
            "window.jitter_minutes",
        ),
        ("gaps = [{ days = 1 }]\n[window]\nend = '12:00'", "window.end"),
        # the calendar
        ("gaps = [{ days = 1 }]\n[calendar]\nweekend = ['caturday']", "calendar.weekend"),
        ("gaps = [{ days = 1 }]\n[calendar]\ndefault_country = 'ZZ'", "calendar.default_country"),
        (
            "gaps = [{ days = 1 }]\n[calendar]\nweekend_from_country = 'yes'",
            "calendar.weekend_from_country",
        ),
        # the limits
        ("gaps = [{ days = 1 }]\n[limits]\nmax_duration_days = 0", "limits.max_duration_days"),
        ("gaps = [{ days = 1 }]\n[limits]\nmin_gap_hours = -1", "limits.min_gap_hours"),
        (
            "gaps = [{ days = 1 }]\n[networks]\nvisa_max_reattempts_30d = -3",
            "networks.visa_max_reattempts_30d",
        ),
        # the final action and unknown keys
        ("gaps = [{ days = 1 }]\nfinal_action = 'shrug'", "final_action"),
        ("gaps = [{ days = 1 }]\nretries = 4", "retries"),
        # blackouts
        (
            "gaps = [{ days = 1 }]\n[[blackouts]]\ngateway = 'stripe'\n"
            "start = 2026-07-01T02:00:00Z",
            "blackouts[0].end",
        ),
        (
            "gaps = [{ days = 1 }]\n[[blackouts]]\ngateway = 'stripe'\n"
            "start = 2026-07-01T02:00:00Z\nend = 2026-07-01T01:00:00Z",
            "blackouts[0].end",
        ),
        (
            "gaps = [{ days = 1 }]\n[[blackouts]]\ngateway = 'stripe'\n"
            "start = 2026-07-01T02:00:00\nend = 2026-07-01T03:00:00Z",
            "blackouts[0].start",
        ),
        # not TOML at all
        ("gaps = [", "policy"),
    ],
)
def test_a_bad_policy_names_the_dotted_field(text: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_policy(text)
    assert caught.value.field == field


def test_every_final_action_is_accepted() -> None:
    for action in FinalAction:
        policy = parse_policy(f"gaps = [{{ days = 1 }}]\nfinal_action = '{action.value}'")
        assert policy.final_action is action
