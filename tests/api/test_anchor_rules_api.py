"""Month-end rules over /v1/schedules: `restrict` is accepted on days 1–28 and an anchor on
the 29th–31st under it is a 422 naming `anchor.local`, on both backends."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.api.conftest import TARGET, Api
from tests.api.test_jobs_api import assert_problem


def anchor_body(local: str, rule: str) -> dict[str, Any]:
    return {
        "anchor": {"local": local, "timezone": "Europe/Paris", "end_of_month": rule},
        "target": {"url": TARGET},
    }


def test_a_restrict_anchor_on_the_28th_renews_on_the_28th(api: Api) -> None:
    http = api.http(api.tenant())
    created = http.post("/v1/schedules", json=anchor_body("2026-01-28T09:00:00", "restrict"))
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert schedule["anchor"]["end_of_month"] == "restrict"
    upcoming = http.get(f"/v1/schedules/{schedule['id']}/upcoming", params={"count": 3}).json()
    assert {datetime.fromisoformat(t).day for t in upcoming["upcoming"]} == {28}


def test_a_restrict_anchor_on_the_31st_is_a_422_saying_what_is_allowed(api: Api) -> None:
    http = api.http(api.tenant())
    response = http.post("/v1/schedules", json=anchor_body("2026-01-31T09:00:00", "restrict"))
    problem = assert_problem(response, 422, "anchor.local")
    (error,) = [e for e in problem["errors"] if e["field"] == "anchor.local"]
    assert "1 to 28" in str(error) and "restrict" in str(error)
    assert http.get("/v1/schedules").json() == {
        "schedules": [],
        "next_cursor": None,
    }  # nothing stored


def test_an_unknown_rule_lists_restrict_among_the_allowed(api: Api) -> None:
    http = api.http(api.tenant())
    response = http.post("/v1/schedules", json=anchor_body("2026-01-15T09:00:00", "nearest"))
    problem = assert_problem(response, 422, "anchor.end_of_month")
    assert "restrict" in str(problem["errors"])
