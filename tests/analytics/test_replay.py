"""The bulk replay gives, row for row, exactly what the planner gives; its input and output."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.analytics.replay import (
    KIND_NAMES,
    attempts_of,
    planned_lines,
    read_failures,
    replay_failures,
    summarize,
)
from recoup.dunning import (
    DunningPolicy,
    Failure,
    Retry,
    decision_kind,
    parse_policy,
    plan_retries,
    preset,
)
from recoup.dunning.policy_paydays import parse_paydays
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import format_utc
from tests.dunning.strategies import ACTION_CODES, HARD_CODES, SOFT_CODES, failures

HEADER = "invoice_id,failed_at,timezone,country,decline_code,advice_code,gateway,merchant_id"


def as_csv(rows: Sequence[Failure], *, offsets: bool = False) -> str:
    lines = [HEADER]
    for f in rows:
        at = f.failed_at.isoformat() if offsets else format_utc(f.failed_at)
        lines.append(
            ",".join(
                [
                    f.invoice,
                    at,
                    f.timezone,
                    f.country or "",
                    f.decline_code or "",
                    ";".join(f.advice_codes),
                    f.gateway or "",
                    f.merchant_id or "",
                ]
            )
        )
    return "\n".join(lines) + "\n"


def assert_replay_matches_plan(rows: Sequence[Failure], policy: DunningPolicy, text: str) -> None:
    table, bad = read_failures(text)
    assert bad == []
    result = replay_failures(table, policy)
    for i, failure in enumerate(rows):
        decision = plan_retries(failure, policy)
        assert KIND_NAMES[result.kind[i]] == decision_kind(decision), failure
        expected = [
            (a.attempt, int(a.at.timestamp()), int(a.local.utcoffset().total_seconds()))  # type: ignore[union-attr]
            for a in (decision.attempts if isinstance(decision, Retry) else ())
        ]
        assert attempts_of(result, i) == expected, failure


ANY_CODE = st.sampled_from([*SOFT_CODES, *HARD_CODES, *ACTION_CODES, ""])


@settings(max_examples=30)
@given(
    st.lists(failures(), min_size=1, max_size=12),
    st.lists(ANY_CODE, min_size=12, max_size=12),
    st.sampled_from(["business-days", "calendar"]),
    st.booleans(),
)
def test_replay_equals_plan_on_random_samples(
    rows: list[Failure], codes: list[str], name: str, offsets: bool
) -> None:
    rows = [
        Failure(
            invoice=f"{f.invoice}_{i}",
            failed_at=f.failed_at,
            timezone=f.timezone,
            country=f.country,
            decline_code=code or None,
            advice_codes=f.advice_codes,
        )
        for i, (f, code) in enumerate(zip(rows, codes, strict=False))
    ]
    policy = preset(name)
    assert_replay_matches_plan(rows, policy, as_csv(rows, offsets=offsets))


@settings(max_examples=30, deadline=None)
@given(
    st.lists(failures(codes=["insufficient_funds", "51", "do_not_honor"]), min_size=1, max_size=12),
    st.sampled_from(["country", [1, 15], ["last_business_day"]]),
)
def test_replay_equals_plan_with_paydays(rows: list[Failure], paydays: object) -> None:
    """Insufficient-funds rows moved to paydays are the planner's, row for row."""
    rows = [dataclasses.replace(f, invoice=f"{f.invoice}_{i}") for i, f in enumerate(rows)]
    policy = dataclasses.replace(preset("business-days"), paydays=parse_paydays(paydays))
    assert_replay_matches_plan(rows, policy, as_csv(rows))


# Windows placed on DST changes, so the replay's row-by-row fallback is exercised.
NIGHT = parse_policy(
    'name = "night"\ngaps = [{ days = 1 }, { days = 1 }]\n[window]\nstart = "00:30"\n'
    'jitter_minutes = 150\n[calendar]\nweekend = ["sat"]\n',
)


@pytest.mark.parametrize(
    ("tz", "failed_at"),
    [
        ("America/New_York", datetime(2026, 3, 6, 17, 0, tzinfo=UTC)),  # gap Sun 8 Mar 02:00
        ("America/New_York", datetime(2026, 10, 30, 16, 0, tzinfo=UTC)),  # fold Sun 1 Nov 01:00
        ("Europe/London", datetime(2026, 3, 27, 12, 0, tzinfo=UTC)),  # gap Sun 29 Mar 01:00
        ("America/Havana", datetime(2026, 3, 6, 17, 0, tzinfo=UTC)),  # gap at midnight
        ("Australia/Lord_Howe", datetime(2026, 10, 2, 3, 0, tzinfo=UTC)),  # 30-minute gap
    ],
)
def test_replay_equals_plan_when_the_window_meets_a_dst_change(
    tz: str, failed_at: datetime
) -> None:
    rows = [
        Failure(invoice=f"inv_{k}", failed_at=failed_at + timedelta(minutes=7 * k), timezone=tz)
        for k in range(40)
    ]
    assert_replay_matches_plan(rows, NIGHT, as_csv(rows))


def test_replay_equals_plan_with_gateway_blackouts_and_advice_delays() -> None:
    policy = parse_policy(
        'name = "maint"\ngaps = [{ business_days = 1 }, { days = 2 }]\n'
        "[limits]\nmin_gap_hours = 30\n"
        '[[blackouts]]\ngateway = "stripe"\nstart = 2026-09-16T15:00:00Z\n'
        "end = 2026-09-16T16:00:00Z\n"
    )
    rows = [
        Failure(
            invoice=f"inv_{k}",
            failed_at=datetime(2026, 9, 15, 12, 0, tzinfo=UTC) + timedelta(minutes=13 * k),
            timezone="America/Chicago",
            country="US",
            gateway="stripe" if k % 2 else "adyen",
            advice_codes=("25",) if k % 3 == 0 else (),
        )
        for k in range(60)
    ]
    assert_replay_matches_plan(rows, policy, as_csv(rows))


def test_quoted_csv_gives_the_same_plan_as_plain_csv() -> None:
    plain = f"{HEADER}\ninv_1,2026-06-23T15:00:00Z,America/Chicago,US,insufficient_funds,,,\n"
    quoted = (
        f'{HEADER}\n"inv_1","2026-06-23T15:00:00Z",America/Chicago,US,"insufficient_funds",,,\n'
    )
    policy = preset("business-days")
    first = replay_failures(read_failures(plain)[0], policy)
    second = replay_failures(read_failures(quoted)[0], policy)
    assert attempts_of(first, 0) == attempts_of(second, 0)
    assert len(attempts_of(first, 0)) == 4


def test_bad_rows_are_reported_by_line_number_and_skipped() -> None:
    text = (
        "invoice_id,failed_at,timezone\n"
        "inv_1,2026-06-23T15:00:00Z,America/Chicago\n"
        "inv_2,not a time,America/Chicago\n"
        "inv_3,2026-06-23T15:00:00Z,Mars/Olympus_Mons\n"
        ",2026-06-23T15:00:00Z,UTC\n"
        "inv_5,2026-06-23T15:00:00Z,UTC\n"
    )
    rows, bad = read_failures(text)
    assert rows.invoice == ["inv_1", "inv_5"]
    assert [(b.line, b.column) for b in bad] == [
        (3, "failed_at"),
        (4, "timezone"),
        (5, "invoice_id"),
    ]
    assert bad[1].message.startswith("line 4: timezone 'Mars/Olympus_Mons'")


def test_ragged_rows_are_reported_too() -> None:
    text = (
        "invoice_id,failed_at,timezone\n"
        "inv_1,2026-06-23T15:00:00Z\n"  # line 2: a field short
        "\n"  # line 3: blank, not a row
        "inv_2,2026-06-23T15:00:00Z,UTC\n"
    )
    rows, bad = read_failures(text)
    assert rows.invoice == ["inv_2"]
    assert [b.line for b in bad] == [2]


def test_strict_mode_fails_on_the_first_bad_row() -> None:
    text = "invoice_id,failed_at,timezone\ninv_1,2026-06-23T15:00:00Z,Nowhere/City\n"
    with pytest.raises(InvalidInput, match="line 2: timezone"):
        read_failures(text, strict=True)


def test_a_missing_required_column_is_refused() -> None:
    with pytest.raises(InvalidInput, match="timezone"):
        read_failures("invoice_id,failed_at\ninv_1,2026-06-23T15:00:00Z\n")


def test_the_summary_counts_decisions_and_spreads_attempts() -> None:
    text = (
        "invoice_id,failed_at,timezone,decline_code\n"
        + "".join(
            f"inv_{k},2026-06-23T{k % 24:02d}:00:00Z,America/Chicago,insufficient_funds\n"
            for k in range(48)
        )
        + "inv_lost,2026-06-23T15:00:00Z,UTC,lost_card\n"
        + "inv_exp,2026-06-23T15:00:00Z,UTC,expired_card\n"
    )
    result = replay_failures(read_failures(text)[0], preset("business-days"))
    summary = summarize(result, compare_nightly=True)
    assert (summary["invoices"], summary["retry"]) == (50, 48)
    assert (summary["no_retry"], summary["await_customer"]) == (1, 1)
    assert summary["attempts"] == sum(summary["by_utc_hour"]) == sum(summary["by_local_hour"])
    assert set(i for i, n in enumerate(summary["by_local_hour"]) if n) <= {10, 11}
    nightly = summary["nightly"]
    assert nightly["attempts"] == summary["attempts"]
    assert nightly["by_utc_hour"][0] == summary["attempts"]
    assert nightly["by_local_hour"][19] == summary["attempts"]  # 00:00Z is 19:00 CDT
    assert nightly["peak_per_minute"] > summary["peak_per_minute"]


def test_the_planned_csv_carries_what_plan_prints() -> None:
    failure = Failure(
        invoice="inv_1",
        failed_at=datetime(2026, 6, 23, 15, 0, tzinfo=UTC),
        timezone="America/Chicago",
        country="US",
        decline_code="insufficient_funds",
    )
    policy = preset("business-days")
    result = replay_failures(read_failures(as_csv([failure]))[0], policy)
    lines = "".join(planned_lines(result)).splitlines()
    decision = plan_retries(failure, policy)
    assert isinstance(decision, Retry)
    assert lines[0] == "invoice_id,attempt,at,local,idempotency_key"
    assert lines[1:] == [
        ",".join(
            [
                "inv_1",
                str(a["attempt"]),
                a["at"],
                a["local"],
                a["idempotency_key"],
            ]
        )
        for a in (x.as_dict() for x in decision.attempts)
    ]


def test_an_empty_file_replays_to_zeros() -> None:
    summary = summarize(replay_failures(read_failures(HEADER + "\n")[0], preset("calendar")))
    assert summary["invoices"] == summary["attempts"] == summary["peak_per_minute"] == 0
    assert summary["by_utc_hour"] == [0] * 24
