"""Named cases of the retry planner: each test pins one situation from the issue."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import pytest

from recoup.dunning import (
    AwaitCustomer,
    CardAttempt,
    Decision,
    Failure,
    NoRetry,
    Retry,
    parse_policy,
    plan_after_update,
    plan_retries,
    preset,
)
from recoup.dunning.landing import reference_date

BUSINESS_DAYS = preset("business-days")
CALENDAR = preset("calendar")


def retry(decision: Decision) -> Retry:
    assert isinstance(decision, Retry), decision
    return decision


def local_dates(decision: Decision) -> list[date]:
    return [a.local.date() for a in retry(decision).attempts]


def chicago(invoice: str, at: datetime, **extra: object) -> Failure:
    return Failure(invoice=invoice, failed_at=at, timezone="America/Chicago", country="US", **extra)  # type: ignore[arg-type]


def test_a_tuesday_failure_retries_wednesday_monday_thursday_and_tuesday() -> None:
    # Tue 2026-09-15 15:00 CDT. +1 business day is Wednesday; +3 from Wednesday is Monday; +3
    # from Monday is Thursday; +3 from Thursday is *Tuesday* (Fri, Mon, Tue), not Wednesday.
    failure = chicago("inv_tue", datetime(2026, 9, 15, 20, 0, tzinfo=UTC))
    dates = local_dates(plan_retries(failure, BUSINESS_DAYS))
    assert dates == [date(2026, 9, 16), date(2026, 9, 21), date(2026, 9, 24), date(2026, 9, 29)]
    assert [d.strftime("%a") for d in dates] == ["Wed", "Mon", "Thu", "Tue"]


def test_the_calendar_preset_counts_days_and_skips_closed_ones() -> None:
    # Fri 2026-09-11: +1 day is Saturday → Monday 14; +3 → Thu 17; +5 → Tue 22; +7 → Tue 29.
    failure = chicago("inv_cal", datetime(2026, 9, 11, 20, 0, tzinfo=UTC))
    dates = local_dates(plan_retries(failure, CALENDAR))
    assert dates == [date(2026, 9, 14), date(2026, 9, 17), date(2026, 9, 22), date(2026, 9, 29)]


@pytest.mark.parametrize(
    ("invoice", "failed_at"),
    [
        ("inv_late", datetime(2026, 9, 16, 4, 58, tzinfo=UTC)),  # Tue 23:58 CDT
        ("inv_early", datetime(2026, 9, 16, 5, 5, tzinfo=UTC)),  # Wed 00:05 CDT
    ],
)
def test_failures_at_23_58_and_00_05_local_both_wait_about_a_day(
    invoice: str, failed_at: datetime
) -> None:
    # Both count from Wednesday (a failure from 22:00 counts from the next date), so both retry
    # in Thursday's window: 33–36 h later. "Local date + 1" would retry the 23:58 one 10 h later.
    first = retry(plan_retries(chicago(invoice, failed_at), BUSINESS_DAYS)).attempts[0]
    assert first.local.date() == date(2026, 9, 17)
    assert timedelta(hours=33) < first.at - failed_at < timedelta(hours=36)


def test_the_reference_date_switches_at_22_00_with_a_10_00_window() -> None:
    tz = UTC
    assert reference_date(datetime(2026, 9, 15, 21, 59, 59, tzinfo=tz), BUSINESS_DAYS) == date(
        2026, 9, 15
    )
    assert reference_date(datetime(2026, 9, 15, 22, 0, tzinfo=tz), BUSINESS_DAYS) == date(
        2026, 9, 16
    )


def test_a_customer_in_utc_plus_14_retries_on_their_own_business_day() -> None:
    # 09:30Z on Tue 15 Sep is 23:30 Tuesday in Kiritimati (UTC+14): it counts from Wednesday,
    # so the first retry is Thursday 10:xx local, which is still Wednesday in UTC.
    failure = Failure(
        invoice="inv_kiri",
        failed_at=datetime(2026, 9, 15, 9, 30, tzinfo=UTC),
        timezone="Pacific/Kiritimati",
    )
    first = retry(plan_retries(failure, BUSINESS_DAYS)).attempts[0]
    assert first.local.date() == date(2026, 9, 17)
    assert first.local.utcoffset() == timedelta(hours=14)
    assert first.at.date() == date(2026, 9, 16)
    assert time(10, 0) <= first.local.time() <= time(11, 30)


def test_retries_keep_their_local_time_across_a_dst_change() -> None:
    # Fri 2026-03-06 15:00 EST; New York springs forward on Sun 8 Mar. Monday's retry is still
    # 10:xx local, now at −04:00.
    failure = Failure(
        invoice="inv_dst",
        failed_at=datetime(2026, 3, 6, 20, 0, tzinfo=UTC),
        timezone="America/New_York",
        country="US",
    )
    first = retry(plan_retries(failure, BUSINESS_DAYS)).attempts[0]
    assert first.local.date() == date(2026, 3, 9)
    assert first.local.utcoffset() == timedelta(hours=-4)
    assert time(10, 0) <= first.local.time() <= time(11, 30)


NIGHT_OWL = parse_policy(
    """
    name = "night-owl"
    gaps = [{ days = 1 }]
    [window]
    start = "02:00"
    jitter_minutes = 59
    [calendar]
    weekend = ["sat"]
    """
)


def test_a_retry_that_would_land_in_the_spring_forward_gap_moves_forward_by_the_gap() -> None:
    # A 02:00 window on Sun 2026-03-08 in New York: 02:00–02:59 does not exist, so the wall time
    # moves forward by the gap (02:xx EST-reading → 03:xx EDT), the same instant as 02:xx −05:00.
    # Sat 10:00 EST: with a 02:00 window a failure counts from its own date until 14:00.
    failure = Failure(
        invoice="inv_gap",
        failed_at=datetime(2026, 3, 7, 15, 0, tzinfo=UTC),
        timezone="America/New_York",
    )
    first = retry(plan_retries(failure, NIGHT_OWL)).attempts[0]
    assert first.local.date() == date(2026, 3, 8)
    assert first.local.hour == 3
    assert first.local.utcoffset() == timedelta(hours=-4)
    assert first.at.hour == 7  # 02:xx at −05:00


def test_a_retry_that_would_land_in_the_fall_back_fold_takes_the_earlier_instant() -> None:
    # 01:00–01:59 happens twice in New York on Sun 2026-11-01: the EDT reading comes first.
    fold_owl = parse_policy(
        'name = "fold"\ngaps = [{ days = 1 }]\n[window]\nstart = "01:00"\njitter_minutes = 59\n'
        '[calendar]\nweekend = ["sat"]\n'
    )
    failure = Failure(
        invoice="inv_fold",
        failed_at=datetime(2026, 10, 31, 16, 0, tzinfo=UTC),
        timezone="America/New_York",
    )
    first = retry(plan_retries(failure, fold_owl)).attempts[0]
    assert first.local.date() == date(2026, 11, 1)
    assert first.local.utcoffset() == timedelta(hours=-4)
    assert first.at.hour == 5


def test_us_thanksgiving_is_skipped() -> None:
    # Wed 2026-11-25 15:00 CST; Thu 26 is Thanksgiving, so the next business day is Fri 27.
    failure = chicago("inv_turkey", datetime(2026, 11, 25, 21, 0, tzinfo=UTC))
    assert local_dates(plan_retries(failure, BUSINESS_DAYS))[0] == date(2026, 11, 27)


def test_uk_christmas_and_the_boxing_day_substitute_are_skipped() -> None:
    # Thu 2026-12-24 in London: Fri 25 is Christmas, Sat 26 Boxing Day (substitute Mon 28).
    failure = Failure(
        invoice="inv_xmas",
        failed_at=datetime(2026, 12, 24, 12, 0, tzinfo=UTC),
        timezone="Europe/London",
        country="GB",
    )
    assert local_dates(plan_retries(failure, BUSINESS_DAYS))[0] == date(2026, 12, 29)


def test_mastercard_mac_25_waits_at_least_24_hours() -> None:
    # Tue 15:00 CDT: the next-business-day window (Wed 10:00–11:30) is 19–20.5 h away, less
    # than MAC 25's 24 h, so the first retry moves to Thursday.
    failed_at = datetime(2026, 9, 15, 20, 0, tzinfo=UTC)
    plain = retry(plan_retries(chicago("inv_mac", failed_at), BUSINESS_DAYS)).attempts[0]
    assert plain.at - failed_at < timedelta(hours=24)
    advised = retry(
        plan_retries(chicago("inv_mac", failed_at, advice_codes=("25",)), BUSINESS_DAYS)
    )
    assert advised.attempts[0].at - failed_at >= timedelta(hours=24)
    assert advised.attempts[0].local.date() == date(2026, 9, 17)
    assert "MAC 25" in advised.reason


@pytest.mark.parametrize("advice", ["03", "21", "do_not_try_again", "mac:03"])
def test_do_not_try_again_advice_overrides_a_soft_decline(advice: str) -> None:
    failure = chicago(
        "inv_dnta",
        datetime(2026, 9, 15, 20, 0, tzinfo=UTC),
        decline_code="insufficient_funds",
        advice_codes=(advice,),
    )
    decision = plan_retries(failure, BUSINESS_DAYS)
    assert isinstance(decision, NoRetry)
    assert "overrides: never" in decision.reason


def test_expired_card_awaits_the_customer() -> None:
    failure = chicago("inv_exp", datetime(2026, 9, 15, 20, 0, tzinfo=UTC), decline_code="54")
    assert isinstance(plan_retries(failure, BUSINESS_DAYS), AwaitCustomer)


def test_after_the_customer_updates_the_card_one_prompt_retry() -> None:
    failure = chicago(
        "inv_exp", datetime(2026, 9, 15, 20, 0, tzinfo=UTC), decline_code="expired_card"
    )
    updated_at = datetime(2026, 9, 17, 3, 12, tzinfo=UTC)
    decision = plan_after_update(failure, BUSINESS_DAYS, updated_at=updated_at)
    (only,) = decision.attempts
    assert only.at == updated_at
    assert only.idempotency_key == "retry:inv_exp:1"
    assert only.local.utcoffset() == timedelta(hours=-5)


def test_an_unknown_decline_code_is_soft_capped_and_reported() -> None:
    failure = chicago("inv_unk", datetime(2026, 9, 15, 20, 0, tzinfo=UTC), decline_code="zorp")
    decision = retry(plan_retries(failure, BUSINESS_DAYS))
    assert len(decision.attempts) == 2
    assert "unknown decline code 'zorp'" in decision.reason


def visa_failure(invoice: str, at: datetime) -> Failure:
    return chicago(invoice, at, decline_code="insufficient_funds", card="card_1", network="visa")


def test_the_visa_limit_is_reached_by_a_second_invoice_on_the_same_card() -> None:
    # 11 reattempts on the card on 25 Aug, then invoice A (failed 1 Sep) plans its 4: 15 in 30
    # days. Invoice B on the same card (failed 14 Sep) must wait until the oldest of them
    # leaves the 30-day window on 24 Sep.
    oldest = datetime(2026, 8, 25, 15, 0, tzinfo=UTC)
    history = [
        CardAttempt(card="card_1", at=oldest + timedelta(hours=k), invoice="inv_old")
        for k in range(11)
    ]
    first = retry(
        plan_retries(visa_failure("inv_a", datetime(2026, 9, 1, 20, tzinfo=UTC)), BUSINESS_DAYS)
    )
    history += [CardAttempt(card="card_1", at=a.at, invoice="inv_a") for a in first.attempts]
    assert len(history) == 15

    second = visa_failure("inv_b", datetime(2026, 9, 14, 20, tzinfo=UTC))
    decision = retry(plan_retries(second, BUSINESS_DAYS, history=history))
    assert "Visa limit: 15 reattempts per card in 30 days" in decision.reason
    assert decision.attempts[0].at >= oldest + timedelta(days=30)
    assert decision.attempts[0].local.date() == date(2026, 9, 24)

    # Without the card's history, invoice B is planned on the normal schedule.
    alone = retry(plan_retries(second, BUSINESS_DAYS))
    assert alone.attempts[0].local.date() == date(2026, 9, 15)


def test_a_visa_card_at_its_limit_for_the_whole_duration_gets_no_retry() -> None:
    failed_at = datetime(2026, 9, 15, 20, 0, tzinfo=UTC)
    history = [
        CardAttempt(card="card_1", at=failed_at + timedelta(days=d), invoice="inv_other")
        for d in range(0, 30, 2)
    ]
    decision = plan_retries(visa_failure("inv_b", failed_at), BUSINESS_DAYS, history=history)
    assert isinstance(decision, NoRetry)
    assert "Visa limit" in decision.reason


def test_a_mastercard_card_takes_at_most_ten_attempts_a_day() -> None:
    failed_at = datetime(2026, 9, 15, 20, 0, tzinfo=UTC)
    history = [
        CardAttempt(card="card_m", at=datetime(2026, 9, 16, 12, k, tzinfo=UTC), invoice=f"i{k}")
        for k in range(10)
    ]
    failure = chicago("inv_m", failed_at, card="card_m", network="mastercard")
    decision = retry(plan_retries(failure, BUSINESS_DAYS, history=history))
    assert "Mastercard limit: 10 attempts per card per day" in decision.reason
    assert decision.attempts[0].at >= datetime(2026, 9, 17, 12, 0, tzinfo=UTC)


def test_no_attempt_is_planned_at_or_after_the_next_renewal() -> None:
    failed_at = datetime(2026, 9, 15, 20, 0, tzinfo=UTC)
    failure = chicago("inv_r", failed_at, next_renewal_at=datetime(2026, 9, 23, tzinfo=UTC))
    decision = retry(plan_retries(failure, BUSINESS_DAYS))
    assert [a.attempt for a in decision.attempts] == [1, 2]
    assert "attempt 3+ dropped: at or after the next renewal" in decision.reason


def test_a_gateway_blackout_delays_the_attempt_to_the_next_business_day() -> None:
    policy = parse_policy(
        """
        name = "with-maintenance"
        gaps = [{ business_days = 1 }]
        [[blackouts]]
        gateway = "stripe"
        start = 2026-09-16T00:00:00Z
        end = 2026-09-17T00:00:00Z
        """
    )
    failure = chicago("inv_bo", datetime(2026, 9, 15, 20, 0, tzinfo=UTC), gateway="stripe")
    decision = retry(plan_retries(failure, policy))
    assert decision.attempts[0].local.date() == date(2026, 9, 17)
    assert "gateway stripe blackout" in decision.reason
    other = chicago("inv_bo", datetime(2026, 9, 15, 20, 0, tzinfo=UTC), gateway="adyen")
    assert retry(plan_retries(other, policy)).attempts[0].local.date() == date(2026, 9, 16)


def test_each_attempt_carries_its_idempotency_key_and_job_name() -> None:
    decision = retry(
        plan_retries(chicago("inv_9", datetime(2026, 9, 15, 20, tzinfo=UTC)), CALENDAR)
    )
    assert [a.idempotency_key for a in decision.attempts][:2] == ["retry:inv_9:1", "retry:inv_9:2"]
    assert decision.attempts[0].name == "dunning-retry-inv_9-1"


def test_a_naive_failure_instant_is_refused() -> None:
    with pytest.raises(ValueError, match="failed_at"):
        Failure(invoice="inv", failed_at=datetime(2026, 9, 15, 20, 0), timezone="UTC")


def test_a_failure_outside_the_accepted_years_is_invalid_input_naming_failed_at() -> None:
    # Embedded callers get the CLI's bound: no OverflowError from the planner's arithmetic.
    from datetime import UTC, datetime, timedelta, timezone

    from recoup.dunning.planner import Failure
    from recoup.errors import InvalidInput

    for failed_at in (
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
        datetime(9999, 12, 31, 12, tzinfo=UTC),
    ):
        with pytest.raises(InvalidInput) as caught:
            Failure(invoice="inv_1", failed_at=failed_at, timezone="UTC")
        assert caught.value.field == "failed_at"
