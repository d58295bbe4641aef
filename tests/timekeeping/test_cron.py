import itertools
from datetime import UTC, datetime

import pytest

from recoup.errors import InvalidInput
from recoup.timekeeping.cron import (
    cron_between,
    cron_next,
    follows_clock,
    iter_cron,
    validate_cron,
)

NY = "America/New_York"
LONDON = "Europe/London"


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def hhmm_z(instants: list[datetime]) -> list[str]:
    return [i.strftime("%m-%d %H:%MZ") for i in instants]


# --- America/New_York, 2026: gap 03-08 02:00→03:00 EST→EDT, fold 11-01 02:00→01:00 ---------


def test_a_fixed_time_in_the_new_york_gap_runs_once_right_after_it() -> None:
    # 02:30 does not exist on 2026-03-08: the job runs at 03:00 EDT (07:00Z), then 02:30 EDT.
    runs = cron_between("30 2 * * *", NY, utc(2026, 3, 7, 12), utc(2026, 3, 10, 0))
    assert hhmm_z(runs) == ["03-08 07:00Z", "03-09 06:30Z"]


def test_a_fixed_time_in_the_new_york_fold_runs_once_at_its_first_instant() -> None:
    # 01:30 happens at 05:30Z (EDT) and 06:30Z (EST) on 2026-11-01; only the first runs.
    runs = cron_between("30 1 * * *", NY, utc(2026, 10, 31, 12), utc(2026, 11, 3, 0))
    assert hhmm_z(runs) == ["11-01 05:30Z", "11-02 06:30Z"]


def test_it_does_not_rerun_a_fold_time_when_asked_from_inside_the_fold() -> None:
    # At 01:15 EST (06:15Z) the fold's 01:30 EDT has passed; cronsim alone would return that
    # past instant, which would run the job a second time.
    assert cron_next("30 1 * * *", NY, utc(2026, 11, 1, 6, 15)) == utc(2026, 11, 2, 6, 30)


def test_a_half_hourly_job_runs_through_the_new_york_fold_in_real_time() -> None:
    # Wildcard hour: 01:00 EDT, 01:30 EDT, 01:00 EST, 01:30 EST, 02:00 EST.
    runs = cron_between("*/30 * * * *", NY, utc(2026, 11, 1, 4, 45), utc(2026, 11, 1, 7, 1))
    assert hhmm_z(runs) == [
        "11-01 05:00Z",
        "11-01 05:30Z",
        "11-01 06:00Z",
        "11-01 06:30Z",
        "11-01 07:00Z",
    ]


def test_a_half_hourly_job_skips_the_new_york_gap() -> None:
    # Wildcard hour: 01:30 EST (06:30Z), then 03:00 EDT (07:00Z); 02:00 and 02:30 never exist.
    runs = cron_between("*/30 * * * *", NY, utc(2026, 3, 8, 6, 15), utc(2026, 3, 8, 7, 31))
    assert hhmm_z(runs) == ["03-08 06:30Z", "03-08 07:00Z", "03-08 07:30Z"]


# --- Europe/London, 2026: gap 03-29 01:00→02:00 GMT→BST, fold 10-25 02:00→01:00 ------------


def test_a_fixed_time_in_the_london_gap_runs_at_two_bst() -> None:
    # 01:30 does not exist on 2026-03-29: 02:00 BST (01:00Z), then 01:30 BST (00:30Z).
    runs = cron_between("30 1 * * *", LONDON, utc(2026, 3, 28, 12), utc(2026, 3, 31, 0))
    assert hhmm_z(runs) == ["03-29 01:00Z", "03-30 00:30Z"]


def test_a_fixed_time_in_the_london_fold_runs_once_in_bst() -> None:
    # 01:30 happens at 00:30Z (BST) and 01:30Z (GMT) on 2026-10-25; only the first runs.
    runs = cron_between("30 1 * * *", LONDON, utc(2026, 10, 24, 12), utc(2026, 10, 27, 0))
    assert hhmm_z(runs) == ["10-25 00:30Z", "10-26 01:30Z"]


def test_an_hourly_job_runs_twice_in_the_london_fold_hour() -> None:
    # Wildcard hour: 01:00 BST (00:00Z) and 01:00 GMT (01:00Z) are both real hours.
    runs = cron_between("0 * * * *", LONDON, utc(2026, 10, 24, 23, 30), utc(2026, 10, 25, 2, 1))
    assert hhmm_z(runs) == ["10-25 00:00Z", "10-25 01:00Z", "10-25 02:00Z"]


# --- other zones ----------------------------------------------------------------------------


def test_lord_howe_catch_up_lands_at_the_end_of_its_thirty_minute_gap() -> None:
    # 02:15 does not exist on 2026-10-04 (02:00 → 02:30): the run is 02:30 +11:00.
    run = cron_next("15 2 * * *", "Australia/Lord_Howe", utc(2026, 10, 3, 1))
    assert run == utc(2026, 10, 3, 15, 30)


def test_a_day_long_jump_is_a_correction_with_no_catch_up_run() -> None:
    # Samoa skipped 2011-12-30 (−10 → +14). Debian cron treats a jump over 3 hours as a clock
    # correction, so noon runs on Dec 29 and Dec 31 with no extra run at midnight of Dec 31
    # (cronsim alone adds one at 2011-12-31 00:00+14:00).
    runs = cron_between("0 12 * * *", "Pacific/Apia", utc(2011, 12, 29), utc(2011, 12, 31))
    assert hhmm_z(runs) == ["12-29 22:00Z", "12-30 22:00Z"]


def test_havana_midnight_runs_at_one_when_midnight_does_not_exist() -> None:
    # Havana springs 00:00 → 01:00 on 2026-03-08: the midnight job runs at 01:00 CDT (05:00Z).
    assert cron_next("0 0 * * *", "America/Havana", utc(2026, 3, 7, 12)) == utc(2026, 3, 8, 5)


def test_both_times_inside_trolls_two_hour_gap_run_once_at_three() -> None:
    # Antarctica/Troll jumps 01:00 → 03:00 on 2026-03-29 (+00 → +02): 01:30 and 02:30 both run
    # at 03:00 +02:00 (01:00Z), once each expression.
    for expression in ("30 1 * * *", "30 2 * * *"):
        runs = cron_between(
            expression, "Antarctica/Troll", utc(2026, 3, 28, 12), utc(2026, 3, 29, 12)
        )
        assert hhmm_z(runs) == ["03-29 01:00Z"], expression


def test_kathmandu_daily_nine_is_quarter_past_three_utc() -> None:
    # +05:45, no DST.
    assert cron_next("0 9 * * *", "Asia/Kathmandu", utc(2026, 6, 1)) == utc(2026, 6, 1, 3, 15)


def test_it_follows_debian_day_of_month_or_day_of_week() -> None:
    # Neither day field starts with "*": the 13th OR any Friday (Fri 2026-02-06, Fri 02-13).
    runs = cron_between("0 9 13 * FRI", "UTC", utc(2026, 2, 1), utc(2026, 2, 14))
    assert hhmm_z(runs) == ["02-06 09:00Z", "02-13 09:00Z"]


# --- contract -------------------------------------------------------------------------------


def test_cron_between_is_half_open() -> None:
    # A run exactly at `start` is included; one exactly at `end` is not.
    runs = cron_between("0 * * * *", "UTC", utc(2026, 1, 1, 10), utc(2026, 1, 1, 12))
    assert runs == [utc(2026, 1, 1, 10), utc(2026, 1, 1, 11)]


def test_cron_next_is_strictly_after() -> None:
    # Asked at a run's own instant, the next run is the following one.
    assert cron_next("0 * * * *", "UTC", utc(2026, 1, 1, 10)) == utc(2026, 1, 1, 11)


def test_it_yields_strictly_increasing_instants_across_a_fold() -> None:
    # Twenty runs of an every-20-minutes job from before New York's fold.
    runs = list(zip(range(20), iter_cron("*/20 * * * *", NY, utc(2026, 11, 1, 4)), strict=False))
    instants = [at for _, at in runs]
    assert all(a < b for a, b in itertools.pairwise(instants))
    assert len(instants) == 20


def test_it_refuses_a_naive_after() -> None:
    # A naive instant would mean a different moment on every machine.
    with pytest.raises(InvalidInput, match="after"):
        cron_next("0 * * * *", NY, datetime(2026, 1, 1))


@pytest.mark.parametrize(
    "expression",
    [
        "61 * * * *",  # minute out of range
        "* * * *",  # four fields
        "0 0 * * * *",  # six fields: seconds are not standard cron
        "0 0 31 2 *",  # February never has a 31st
        "0 25 * * *",  # hour out of range
        "",  # nothing at all
        "@reboot",  # not a schedule
    ],
)
def test_it_refuses_a_bad_expression_naming_the_cron_field(expression: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_cron(expression)
    assert caught.value.field == "cron"
    assert caught.value.value == expression


def test_it_expands_aliases_and_normalises_spacing() -> None:
    # @daily is midnight every day; extra blanks do not matter.
    assert validate_cron("@daily") == "0 0 * * *"
    assert validate_cron("  0   9 * *  mon-fri ") == "0 9 * * MON-FRI"


@pytest.mark.parametrize(
    ("expression", "by_clock"),
    [
        ("30 2 * * *", False),  # fixed time
        ("0 */2 * * *", True),  # wildcard hour
        ("*/15 3 * * *", True),  # wildcard minute (Debian counts it as a wildcard job)
        ("@hourly", True),  # 0 * * * *
    ],
)
def test_it_tells_clock_following_expressions_from_fixed_time_ones(
    expression: str, by_clock: bool
) -> None:
    assert follows_clock(expression) is by_clock
