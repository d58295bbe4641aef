"""`report_from_json` reads back what `report_json` wrote: the same report, so a report a
server built prints through the same terminal renderer (`recoup report --url`)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from recoup.analytics.recovery import MerchantTag, ReportOptions, build_report, report_json
from recoup.analytics.recovery.json_reading import report_from_json
from recoup.dunning.invoice import Invoice
from recoup.errors import InvalidInput
from tests.analytics.recovery.build import NOW
from tests.analytics.recovery.test_properties import invoices
from tests.analytics.recovery.test_render import sample
from tests.analytics.recovery.test_spikes import LOW, TAGGED_AT, small_merchant


def through_json(document: dict[str, object]) -> dict[str, object]:
    return json.loads(json.dumps(document))


def test_a_report_with_an_experiment_reads_back_equal() -> None:
    report = sample()
    assert report.experiment is not None and report.merchants
    assert report_from_json(through_json(report_json(report))) == report


def test_a_report_with_spikes_and_a_tagged_merchant_in_review_reads_back_equal() -> None:
    tag = MerchantTag(merchant_id="m-small", tag="new", note="onboarded", tagged_at=TAGGED_AT)
    report = build_report(
        small_merchant(worse_after_tag=True),
        options=ReportOptions(now=NOW, **LOW),  # type: ignore[arg-type]
        tags=[tag],
    )
    assert report.review_queue[0].tag == tag and report.review_queue[0].spikes
    assert report_from_json(through_json(report_json(report))) == report


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(invoices())
def test_every_report_reads_back_equal(found: list[Invoice]) -> None:
    report = build_report(found, options=ReportOptions(now=NOW, min_volume=2))
    assert report_from_json(through_json(report_json(report))) == report


def test_the_apis_window_beside_the_report_is_left_aside() -> None:
    document = {"since": "2026-01-01T00:00:00+00:00", **report_json(sample(experiment=False))}
    assert report_from_json(document) == sample(experiment=False)


@pytest.mark.parametrize(
    "document",
    [
        {"schema": "another/1"},
        {**report_json(sample()), "overall": {"key": "all"}},  # a bucket without its counts
    ],
)
def test_a_document_of_another_shape_is_invalid_input(document: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        report_from_json(document)
