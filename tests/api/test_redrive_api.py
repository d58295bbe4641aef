"""POST /v1/jobs/redrive over real HTTP on both backends: a dry run counts the tenant's failed
jobs the filter names, then the redrive schedules them again; each call writes an audit line
(who, when, the filter, how many); another tenant's jobs are never touched; a bad filter is a
422 naming the field."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest

from recoup.jobs.model import JobState
from tests.api.conftest import Api
from tests.api.test_jobs_api import assert_problem
from tests.storage.test_callbacks_store import T0
from tests.storage.test_redrive_contract import failed

HOUR = timedelta(hours=1)


def test_a_dry_run_counts_then_the_redrive_schedules_the_jobs_again(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    acme, rival = api.tenant(), api.tenant()
    mine = [
        failed(api.store, T0, name="sync-1", group="g", tenant=acme.tenant, error="HTTP 503"),
        failed(api.store, T0 + HOUR, name="sync-2", group="g", tenant=acme.tenant, error="503"),
    ]
    other = failed(api.store, T0 + 2 * HOUR, name="sync-3", tenant=acme.tenant, error="HTTP 404")
    theirs = failed(api.store, T0, name="sync-1", group="g", tenant=rival.tenant, error="503")
    http = api.http(acme)
    body = {
        "group": "g",
        "name_prefix": "sync-",
        "error": "503",
        "since": T0.isoformat(),
        "until": (T0 + 2 * HOUR).isoformat(),
    }
    with caplog.at_level(logging.INFO, logger="recoup.audit"):
        counted = http.post("/v1/jobs/redrive", json={**body, "dry_run": True})
        assert counted.status_code == 200, counted.text
        assert counted.json()["matched"] == 2 and counted.json()["redriven"] == 0
        assert {api.store.get(acme.tenant, j).state for j in mine} == {JobState.FAILED}  # type: ignore[union-attr]

        done = http.post("/v1/jobs/redrive", json=body)
    assert done.status_code == 200, done.text
    assert done.json() == {
        "matched": 2,
        "redriven": 2,
        "dry_run": False,
        "filter": {
            **body,
            "tenant": acme.tenant,
            "since": "2026-03-01T12:00:00+00:00",
            "until": "2026-03-01T14:00:00+00:00",
        },
    }
    assert {api.store.get(acme.tenant, j).state for j in mine} == {JobState.SCHEDULED}  # type: ignore[union-attr]
    assert api.store.get(acme.tenant, other).state is JobState.FAILED  # type: ignore[union-attr]
    assert api.store.get(rival.tenant, theirs).state is JobState.FAILED  # type: ignore[union-attr]

    # Only the audit logger's lines: other threads of the process may log meanwhile.
    audit = [r for r in caplog.records if r.name == "recoup.audit"]
    lines = [json.loads(r.getMessage().removeprefix("redrive ")) for r in audit]
    assert [(line["dry_run"], line["matched"], line["redriven"]) for line in lines] == [
        (True, 2, 0),
        (False, 2, 2),
    ]
    assert {line["who"] for line in lines} == {f"api:tenant={acme.tenant}"}
    assert all(line["filter"]["group"] == "g" and line["at"] for line in lines)


def test_a_bad_filter_is_refused_naming_the_field(api: Api) -> None:
    http = api.http(api.tenant())
    assert_problem(http.post("/v1/jobs/redrive", json={"group": ""}), 422, "group")
    assert_problem(http.post("/v1/jobs/redrive", json={"state": "failed"}), 422, "state")
    backwards = {"since": (T0 + HOUR).isoformat(), "until": T0.isoformat()}
    assert_problem(http.post("/v1/jobs/redrive", json=backwards), 422, "until")
    assert_problem(http.post("/v1/jobs/redrive", json={"dry_run": "yes"}), 422, "dry_run")
