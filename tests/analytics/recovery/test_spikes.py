"""Decline-code spikes against each bucket's own baseline, low-volume merchant windows, tags and
the review queue."""

from __future__ import annotations

from datetime import datetime, timedelta

from recoup.analytics.recovery import MerchantTag, ReportOptions, build_report
from recoup.analytics.recovery.spikes import ChargeEvent, charge_events, find_spikes
from recoup.dunning.invoice import Invoice
from tests.analytics.recovery.build import NOW, invoice

WEEK = timedelta(days=7)


def failures(
    prefix: str,
    start: datetime,
    end: datetime,
    codes: dict[str, int],
    **fields: object,
) -> list[Invoice]:
    """Invoices opened by the given decline codes (code → how many), spread evenly over
    [start, end), never retried: each is one charge outcome."""
    total = sum(codes.values())
    step = (end - start) / total
    out, i = [], 0
    for code, n in codes.items():
        for _ in range(n):
            out.append(
                invoice(f"{prefix}-{i}", failed_at=start + i * step, decline_code=code, **fields)
            )
            i += 1
    return out


def gateway(name: str, baseline: dict[str, int], current: dict[str, int]) -> list[Invoice]:
    """A gateway's failures: `baseline` over the four weeks before the last, `current` in it."""
    return failures(
        f"{name}-base", NOW - 5 * WEEK, NOW - WEEK, baseline, gateway=name, merchant_id=None
    ) + failures(f"{name}-now", NOW - WEEK, NOW, current, gateway=name, merchant_id=None)


def spikes_of(invoices: list[Invoice], **options: object) -> set[tuple[str, str, str]]:
    report = build_report(invoices, options=ReportOptions(now=NOW, **options))  # type: ignore[arg-type]
    return {(s.dimension, s.key, s.decline_code) for s in report.spikes}


def test_a_spike_is_judged_against_the_gateways_own_baseline() -> None:
    invoices = [
        # gw-a always declines 30% as do_not_honor: its normal
        *gateway(
            "gw-a",
            {"do_not_honor": 30, "insufficient_funds": 70},
            {"do_not_honor": 15, "insufficient_funds": 35},
        ),
        # gw-b used to at 5%, and now at 30%: it is sick
        *gateway(
            "gw-b",
            {"do_not_honor": 5, "insufficient_funds": 95},
            {"do_not_honor": 15, "insufficient_funds": 35},
        ),
    ]
    # Both gateways show the same 15 do_not_honor this week, more than any other bucket; only
    # the one whose share moved against its own past is flagged.
    assert spikes_of(invoices) == {("gateway", "gw-b", "do_not_honor")}
    report = build_report(invoices, options=ReportOptions(now=NOW))
    spike = report.spikes[0]
    assert (spike.current.count, spike.current.total) == (15, 50)
    assert (spike.baseline.count, spike.baseline.total) == (5, 100)
    assert spike.current.low > spike.baseline.high
    assert (spike.window_start, spike.window_end, spike.window_days) == (NOW - WEEK, NOW, 7)


def test_no_spike_when_failures_rise_evenly_everywhere() -> None:
    # A busy week: three times the failures on every gateway, in the same proportions. The
    # global count of do_not_honor triples; no bucket's share moves.
    invoices = [
        *gateway(
            "gw-a",
            {"do_not_honor": 20, "insufficient_funds": 80},
            {"do_not_honor": 15, "insufficient_funds": 60},
        ),
        *gateway(
            "gw-b",
            {"do_not_honor": 8, "insufficient_funds": 92},
            {"do_not_honor": 6, "insufficient_funds": 69},
        ),
    ]
    assert spikes_of(invoices) == set()


def test_a_code_seen_fewer_than_the_minimum_count_never_spikes() -> None:
    invoices = gateway(
        "gw-a", {"insufficient_funds": 100}, {"fraudulent": 4, "insufficient_funds": 4}
    )
    assert spikes_of(invoices) == set()
    assert spikes_of(invoices, spike_min_count=3) == {("gateway", "gw-a", "fraudulent")}


def test_a_bucket_with_no_baseline_is_never_flagged() -> None:
    invoices = failures("new", NOW - WEEK, NOW, {"do_not_honor": 40}, gateway="gw-new")
    assert spikes_of(invoices) == set()


def test_retry_outcomes_count_as_charge_outcomes() -> None:
    # The failures that open dunning are stable; the retries on gw-a start failing with
    # processing_error this week.
    base = failures("b", NOW - 5 * WEEK, NOW - WEEK, {"insufficient_funds": 40}, gateway="gw-a")
    retried = [
        invoice(
            f"r{i}", [(1, "succeeded", None)], failed_at=NOW - 5 * WEEK + i * timedelta(hours=12)
        )
        for i in range(40)
    ]
    sick = [
        invoice(
            f"s{i}",
            [(1, "failed", "processing_error")],
            failed_at=NOW - WEEK + i * timedelta(hours=3),
        )
        for i in range(20)
    ]
    assert ("gateway", "gw-a", "processing_error") in spikes_of(base + retried + sick)


def test_campaigns_ageing_into_retries_is_no_spike() -> None:
    # Retries are soft declines by construction: a window of mostly retries carries more
    # insufficient_funds than a window of mostly opening failures. Compared apart (failures,
    # then each retry number), each keeps its share and nothing is flagged; pooled, the later
    # window would "spike".
    codes = ("insufficient_funds", "do_not_honor")
    opened = NOW - 5 * WEEK
    ageing = []
    for i in range(40):
        failed_at = opened + i * timedelta(hours=12)
        second = (NOW - WEEK + i * timedelta(hours=3) - failed_at) / timedelta(hours=1)
        ageing.append(
            invoice(
                f"a{i}",
                [(24, "failed", "insufficient_funds"), (second, "failed", "insufficient_funds")],
                failed_at=failed_at,
                decline_code=codes[i % 2],
            )
        )
    fresh = [
        invoice(f"f{j}", failed_at=NOW - WEEK + j * timedelta(hours=12), decline_code=codes[j % 2])
        for j in range(5)
    ]
    invoices = ageing + fresh
    assert spikes_of(invoices) == set()

    pooled = [
        ChargeEvent(at=e.at, declined=e.declined, decline_code=e.decline_code)
        for i in invoices
        for e in charge_events(i)
    ]
    flagged = find_spikes(
        pooled,
        dimension="gateway",
        key="gw-a",
        end=NOW,
        window_days=7,
        baseline_windows=4,
        confidence=0.95,
        min_count=5,
    )
    assert [s.decline_code for s in flagged] == ["insufficient_funds"]


# The low-volume merchant of the tag tests: judged over 14 days (fewer than 30 outcomes in the
# last 7), its baseline the 2 × 14 days before.
LOW = {"window_days": 7, "low_volume_window_days": 14, "baseline_windows": 2}
TAGGED_AT = NOW - timedelta(days=4)


def small_merchant(*, worse_after_tag: bool) -> list[Invoice]:
    invoices = failures(
        "base",
        NOW - 42 * timedelta(days=1),
        NOW - 14 * timedelta(days=1),
        {"insufficient_funds": 40},
        merchant_id="m-small",
    )
    # Before the tag: do_not_honor starts (10 of 14 outcomes).
    invoices += failures(
        "before",
        NOW - timedelta(days=14),
        TAGGED_AT,
        {"do_not_honor": 10, "insufficient_funds": 4},
        merchant_id="m-small",
    )
    if worse_after_tag:  # after it: a new code the tag never saw
        invoices += failures(
            "after", TAGGED_AT, NOW, {"processing_error": 8}, merchant_id="m-small"
        )
    return invoices


def big_merchant() -> list[Invoice]:
    return failures("big", NOW - 5 * WEEK, NOW, {"insufficient_funds": 200}, merchant_id="m-big")


def test_a_low_volume_merchant_is_judged_over_the_longer_window() -> None:
    report = build_report(
        small_merchant(worse_after_tag=False) + big_merchant(),
        options=ReportOptions(now=NOW, **LOW),  # type: ignore[arg-type]
    )
    judged = {m.merchant_id: m for m in report.merchants}
    assert (judged["m-big"].low_volume, judged["m-big"].window_days) == (False, 7)
    assert (judged["m-small"].low_volume, judged["m-small"].window_days) == (True, 14)
    assert judged["m-small"].recent_outcomes < 30 <= judged["m-big"].recent_outcomes
    assert [s.decline_code for s in judged["m-small"].spikes] == ["do_not_honor"]
    assert [i.merchant_id for i in report.review_queue] == ["m-small"]
    assert report.review_queue[0].tag is None and report.suppressed == []


def test_a_tag_suppresses_the_flag_while_the_data_agrees_with_it() -> None:
    tag = MerchantTag(
        merchant_id="m-small", tag="seasonal", note="summer sale", tagged_at=TAGGED_AT
    )
    report = build_report(
        small_merchant(worse_after_tag=False),
        options=ReportOptions(now=NOW, **LOW),  # type: ignore[arg-type]
        tags=[tag],
    )
    assert report.review_queue == []
    assert [(i.merchant_id, i.tag, i.contradicted) for i in report.suppressed] == [
        ("m-small", tag, False)
    ]


def test_a_tag_is_contradicted_by_a_spike_significantly_worse_than_when_tagged() -> None:
    tag = MerchantTag(merchant_id="m-small", tag="new", note="onboarded", tagged_at=TAGGED_AT)
    report = build_report(
        small_merchant(worse_after_tag=True),
        options=ReportOptions(now=NOW, **LOW),  # type: ignore[arg-type]
        tags=[tag],
    )
    assert report.suppressed == []
    [item] = report.review_queue
    assert item.contradicted and item.tag == tag
    assert "processing_error" in item.reason


def test_a_tag_made_after_now_or_over_an_empty_window_does_not_suppress() -> None:
    invoices = small_merchant(worse_after_tag=False)
    later = MerchantTag(merchant_id="m-small", tag="other", note="", tagged_at=NOW + WEEK)
    before_any_data = MerchantTag(
        merchant_id="m-small", tag="new", note="", tagged_at=NOW - timedelta(days=100)
    )
    for tags in ([later], [before_any_data]):
        report = build_report(invoices, options=ReportOptions(now=NOW, **LOW), tags=tags)  # type: ignore[arg-type]
        assert [i.merchant_id for i in report.review_queue] == ["m-small"]
    assert (
        build_report(
            invoices,
            options=ReportOptions(now=NOW, **LOW),
            tags=[before_any_data],  # type: ignore[arg-type]
        )
        .review_queue[0]
        .contradicted
    )


def test_a_high_volume_merchant_spike_is_reported_but_not_queued() -> None:
    invoices = failures(
        "m", NOW - 5 * WEEK, NOW - WEEK, {"insufficient_funds": 200}, merchant_id="m-big"
    ) + failures(
        "m2", NOW - WEEK, NOW, {"do_not_honor": 20, "insufficient_funds": 30}, merchant_id="m-big"
    )
    report = build_report(invoices, options=ReportOptions(now=NOW))
    assert ("merchant_id", "m-big", "do_not_honor") in {
        (s.dimension, s.key, s.decline_code) for s in report.spikes
    }
    assert report.review_queue == []
