"""The dashboard's bulk redrive, in-process on both backends: a filter counted first, shown with
a confirmation naming the count, redriven by a POST with the session's CSRF token (refused
without it), the visitor's own tenant only, an audit line per step, and a bad filter answered
with a page naming the field."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest

from recoup.jobs.model import JobState
from tests.api.dashboard.desk import Desk, csrf_of, error_of, page_text
from tests.storage.test_callbacks_store import T0
from tests.storage.test_redrive_contract import failed

HOUR = timedelta(hours=1)


def test_a_filter_is_counted_confirmed_and_redriven(
    desk: Desk, caplog: pytest.LogCaptureFixture
) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    desk.tenant("rival")
    mine = [failed(desk.store, T0 + n * HOUR, group="g", tenant="acme") for n in range(2)]
    other = failed(desk.store, T0, group="h", tenant="acme")
    theirs = failed(desk.store, T0, group="g", tenant="rival")
    search = {"group": "g", "since": "2026-03-01T12:00:00Z", "error": "boom"}

    empty = browser.get("/redrive")
    assert empty.status_code == 200 and "Redrive failed jobs" in page_text(empty)
    assert "failed job(s) match" not in page_text(empty)
    with caplog.at_level(logging.INFO, logger="recoup.audit"):
        counted = browser.get("/redrive", params={**search, "count": "1"})
        assert "2 failed job(s) match." in page_text(counted)
        assert "Redrive 2 failed job(s)" in page_text(counted)
        assert {desk.store.get("acme", j).state for j in mine} == {JobState.FAILED}  # type: ignore[union-attr]

        refused = browser.post("/redrive", data=search)  # no CSRF token
        assert refused.status_code == 403
        done = browser.post("/redrive", data={**search, "csrf": csrf_of(counted.text)})
    assert done.status_code == 303
    after = browser.get(done.headers["location"])
    assert "2 of 2 failed job(s) redriven." in page_text(after)
    assert {desk.store.get("acme", j).state for j in mine} == {JobState.SCHEDULED}  # type: ignore[union-attr]
    assert desk.store.get("acme", other).state is JobState.FAILED  # type: ignore[union-attr]
    assert desk.store.get("rival", theirs).state is JobState.FAILED  # type: ignore[union-attr]
    audit = [r for r in caplog.records if r.name == "recoup.audit"]  # not other threads' lines
    lines = [json.loads(r.getMessage().removeprefix("redrive ")) for r in audit]
    assert [(line["dry_run"], line["matched"], line["redriven"]) for line in lines] == [
        (True, 2, 0),
        (False, 2, 2),
    ]
    assert {line["who"] for line in lines} == {"dashboard:tenant=acme"}


def test_a_bad_filter_is_a_page_naming_the_field(desk: Desk) -> None:
    browser = desk.sign_in(desk.tenant("acme"))
    answer = browser.get("/redrive", params={"since": "yesterday", "count": "1"})
    assert answer.status_code in (400, 422)
    assert error_of(answer).startswith("since")
    backwards = {"since": "2026-03-02T00:00:00Z", "until": "2026-03-01T00:00:00Z", "count": "1"}
    assert error_of(browser.get("/redrive", params=backwards)).startswith("until")
