"""`build_report` on hand-built invoices whose figures are known."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recoup.analytics.recovery import Bucket, ReportOptions, attempt_log, build_report
from recoup.errors import InvalidInput
from tests.analytics.recovery.build import NOW, T0, invoice


def options(**overrides: object) -> ReportOptions:
    return ReportOptions(now=NOW, **{"min_volume": 1, **overrides})  # type: ignore[arg-type]


def by_key(buckets: list[Bucket]) -> dict[str, tuple[int, int]]:
    return {b.key: (b.recovered, b.count) for b in buckets}


def campaign() -> list:  # type: ignore[type-arg]
    return [
        # a: attempt 1 declined, attempt 2 recovered it
        invoice("a", [(24, "failed", "insufficient_funds"), (72, "succeeded", None)]),
        # b: two declines, the third attempt cancelled when the campaign ended: exhausted
        invoice(
            "b",
            [
                (24, "failed", "insufficient_funds"),
                (72, "failed", "insufficient_funds"),
                (120, "cancelled", None),
            ],
        ),
        # c: recovered by the first attempt
        invoice("c", [(24, "succeeded", None)]),
        # e: paid out of band after one decline; attempt 2 cancelled
        invoice(
            "e",
            [(24, "failed", "insufficient_funds"), (72, "cancelled", None)],
            recovered_by="paid_out_of_band",
        ),
        # d: still retrying: in no denominator
        invoice(
            "d",
            [(24, "failed", "insufficient_funds"), (72, "scheduled", None)],
            state="retrying",
        ),
    ]


def test_overall_rate_counts_finished_invoices_only() -> None:
    report = build_report(campaign(), options=options())
    assert (report.invoices, report.finished, report.running) == (5, 4, 1)
    assert report.running_by_state == {"retrying": 1}
    assert (report.overall.recovered, report.overall.count) == (3, 4)
    assert report.overall.rate == pytest.approx(0.75)
    assert report.recovered_by == {"attempt": 2, "paid_out_of_band": 1}


def test_by_attempt_counts_attempts_that_ran_and_their_successes() -> None:
    report = build_report(campaign(), options=options())
    # Attempt 1 ran on a, b, c, e (d is running); only c succeeded. Attempt 2 ran on a and b.
    # Attempt 3 of b was cancelled: it never ran, so it has no bucket.
    assert by_key(report.by_attempt) == {"1": (1, 4), "2": (1, 2)}
    # Share of the 4 finished invoices recovered by a retry numbered ≤ n: c, then c and a.
    assert by_key(report.cumulative_by_attempt) == {"1": (1, 4), "2": (2, 4)}


def test_a_running_invoice_is_in_no_denominator_and_counts_once_it_ends() -> None:
    running = invoice(
        "r",
        [(24, "failed", "do_not_honor")],
        state="awaiting_customer",
        gateway="gw-z",
        merchant_id="m-z",
    )
    report = build_report([running], options=options())
    assert report.running == 1 and report.finished == 0
    assert report.overall.count == 0 and report.overall.rate is None
    assert report.by_attempt == [] and report.by_gateway == [] and report.by_merchant == []
    assert all(b.count == 0 for b in report.by_local_hour)

    ended = invoice("r", [(24, "failed", "do_not_honor")], gateway="gw-z", merchant_id="m-z")
    report = build_report([ended], options=options())
    assert report.finished == 1 and by_key(report.by_gateway) == {"gw-z": (0, 1)}


def test_local_hour_and_weekday_are_read_in_the_customers_zone() -> None:
    tuesday_2am_utc = datetime(2026, 6, 2, 2, tzinfo=UTC)  # Monday 22:00 in New York (EDT)
    invoices = [
        # 14:00 UTC is 10:00 in New York (UTC−4 in June)
        invoice("ny", [(26, "succeeded", None)], failed_at=T0, timezone="America/New_York"),
        # 04:30 UTC is 10:00 in Kolkata (UTC+5:30)
        invoice(
            "in", [(16.5, "failed", "insufficient_funds")], failed_at=T0, timezone="Asia/Kolkata"
        ),
        invoice(
            "late",
            [(0, "failed", "insufficient_funds")],
            failed_at=tuesday_2am_utc,
            timezone="America/New_York",
        ),
    ]
    report = build_report(invoices, options=options())
    hours = by_key(report.by_local_hour)
    assert len(hours) == 24
    assert hours["10"] == (1, 2)
    assert hours["22"] == (0, 1)
    assert hours["14"] == (0, 0) and hours["4"] == (0, 0)  # the UTC hours stay empty
    weekdays = by_key(report.by_weekday)
    assert list(weekdays) == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    assert weekdays["Mon"] == (0, 1)  # still Monday evening in New York
    assert weekdays["Tue"] == (1, 2)
    # The cohort is the local billing date: 2 June 02:00 UTC is 1 June in New York.
    assert by_key(report.by_cohort) == {"2026-06-01": (1, 3)}


def test_timing_counts_soft_declines_only_and_hard_declines_are_split_out() -> None:
    invoices = [
        invoice("soft", [(24, "failed", "insufficient_funds")]),
        # opened by a card update request, then one prompt attempt after the update
        invoice("cust", [(24, "succeeded", None)], decline_code="expired_card"),
        invoice("hard", decline_code="stolen_card"),  # never retried
        invoice("hard-paid", decline_code="lost_card", recovered_by="paid_out_of_band"),
        # a soft code made hard by its advice code: the invoice counts as hard
        invoice("advised", decline_code="insufficient_funds", advice_code="do_not_try_again"),
    ]
    report = build_report(invoices, options=options())
    assert sum(b.count for b in report.by_local_hour) == 1
    assert sum(b.count for b in report.by_weekday) == 1
    assert report.timing_excluded_attempts == 1
    assert (report.hard_declines.recovered, report.hard_declines.count) == (1, 3)
    assert by_key(report.by_decline_category) == {
        "soft": (0, 1),
        "customer": (1, 1),
        "hard": (1, 3),
    }
    codes = {b.key: b for b in report.by_decline_code}
    assert codes["stolen_card"].category == "hard"
    assert codes["expired_card"].category == "customer"
    # the code's bucket keeps the code's own class
    assert (codes["insufficient_funds"].category, codes["insufficient_funds"].count) == ("soft", 2)


def test_a_bucket_below_the_minimum_volume_says_insufficient_data() -> None:
    invoices = [invoice(f"g{i}", [(24, "succeeded", None)], gateway="big") for i in range(3)]
    invoices += [invoice(f"s{i}", [(24, "succeeded", None)], gateway="small") for i in range(2)]
    report = build_report(invoices, options=options(min_volume=3))
    gateways = {b.key: b for b in report.by_gateway}
    assert not gateways["big"].insufficient_data
    assert gateways["small"].insufficient_data  # 2 of 2 recovered, yet not "healthy"
    assert gateways["small"].rate == 1.0 and gateways["small"].low is not None
    assert gateways["small"].low < 0.5
    empty = next(b for b in report.by_local_hour if b.count == 0)
    assert empty.insufficient_data and empty.rate is None


def test_every_rate_carries_its_wilson_interval() -> None:
    invoices = [
        invoice(f"i{i}", [(24, "succeeded" if i < 81 else "failed", None)]) for i in range(263)
    ]
    report = build_report(invoices, options=options())
    assert report.overall.low == pytest.approx(0.2553, abs=5e-5)
    assert report.overall.high == pytest.approx(0.3662, abs=5e-5)


def test_invoices_without_gateway_or_merchant_fall_in_a_none_bucket() -> None:
    report = build_report([invoice("x", gateway=None, merchant_id=None)], options=options())
    assert by_key(report.by_gateway) == {"(none)": (0, 1)}
    assert by_key(report.by_merchant) == {"(none)": (0, 1)}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("min_volume", 0),
        ("window_days", 0),
        ("low_volume_window_days", 3),  # shorter than the 7-day window
        ("confidence", 1.0),
        ("experiment", ("same", "same")),
        ("now", datetime(2026, 7, 1)),  # naive
    ],
)
def test_bad_options_are_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        ReportOptions(**{"now": NOW, field: value})  # type: ignore[arg-type]
    assert caught.value.field == field


def test_negative_double_charges_are_refused() -> None:
    with pytest.raises(InvalidInput, match="double_charges"):
        build_report([], options=options(), double_charges=-1)


def test_the_attempt_log_has_every_input_of_every_attempt() -> None:
    rows = attempt_log(
        [
            invoice(
                "ny",
                [(26, "failed", "stolen_card"), (50, "cancelled", None)],
                timezone="America/New_York",
                merchant_id="m-9",
                gateway="gw-b",
                policy="aggressive",
            )
        ]
    )
    assert [(r.attempt, r.outcome) for r in rows] == [(1, "failed"), (2, "cancelled")]
    first = rows[0]
    assert (first.local_hour, first.weekday) == (10, 1)  # Tuesday 10:00 in New York
    assert first.at == datetime(2026, 6, 2, 14, tzinfo=UTC)
    assert (first.decline_code, first.decline_category) == ("stolen_card", "hard")
    assert (first.failure_decline_code, first.failure_category) == ("insufficient_funds", "soft")
    assert (first.gateway, first.merchant_id, first.policy) == ("gw-b", "m-9", "aggressive")
    assert first.cohort.isoformat() == "2026-06-01"
    assert rows[1].decline_category is None
