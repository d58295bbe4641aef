"""Callbacks and dead letters through /v1 over real HTTP, on both backends, with a worker on a
virtual clock: a job's end is reported once, signed with the tenant's Standard Webhooks secret,
to `callback` (succeeded) or `failure_callback` (failed for good), never per retried attempt
nor on cancellation; a schedule's jobs inherit them; callback URLs pass the SSRF guard; failed
jobs are listed a page at a time and redriven (`POST /v1/jobs/{id}/retry`, 409 unless failed)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from recoup.jobs.ssrf import SsrfGuard
from tests.api.conftest import Api
from tests.api.qstash_support import Served, served
from tests.api.test_jobs_api import assert_problem

__all__ = ["served"]  # fixtures

STATUS_OF_PATH = {"/ok": 200, "/busy": 503, "/gone": 404}  # the rest (callbacks) answer 200


@dataclass
class Receiver:
    """Answers by path (`STATUS_OF_PATH`), records every request with whether its Standard
    Webhooks signature verified against the tenant's secret."""

    secret: str
    calls: list[tuple[str, dict[str, Any] | str, bool]] = field(default_factory=list)

    def __post_init__(self) -> None:
        webhook = Webhook(self.secret)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    webhook.verify(raw, headers)
                    verified = True
                except Exception:
                    verified = False
                body: dict[str, Any] | str = raw.decode()
                if headers.get("content-type", "").startswith("application/json"):
                    body = json.loads(raw)
                receiver.calls.append((self.path, body, verified))
                self.send_response(STATUS_OF_PATH.get(self.path, 200))
                self.send_header("Content-Length", "4")
                self.end_headers()
                self.wfile.write(b"done")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def calls_to(self, path: str) -> list[dict[str, Any]]:
        found = []
        for called, body, verified in self.calls:
            if called == path:
                assert verified, "every delivery carries a valid Standard Webhooks signature"
                assert isinstance(body, dict)
                found.append(body)
        return found


@pytest.fixture
def receiver(served: Served) -> Iterator[Receiver]:
    tenant = served.store.get_tenant(served.tenant)
    assert tenant is not None
    found = Receiver(tenant.signing_secret)
    yield found
    found.server.shutdown()
    found.server.server_close()


@pytest.fixture
def http(served: Served) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=served.url, headers={"Authorization": f"Bearer {served.token}"}
    ) as client:
        yield client


def create(http: httpx.Client, receiver: Receiver, path: str, **fields: Any) -> dict[str, Any]:
    body = {
        "delay_seconds": 0,
        "target": {"url": receiver.url(path)},
        "callback": receiver.url("/succeeded"),
        "failure_callback": receiver.url("/failed"),
        **fields,
    }
    created = http.post("/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    job: dict[str, Any] = created.json()
    return job


def test_a_success_is_reported_once_to_the_callback_signed(
    served: Served, receiver: Receiver, http: httpx.Client
) -> None:
    job = create(http, receiver, "/ok", name="export")
    assert job["callback"] == receiver.url("/succeeded")
    assert job["failure_callback"] == receiver.url("/failed")
    assert job["callbacks_group"] == f"callback:{job['id']}"
    served.deliver()
    (report,) = receiver.calls_to("/succeeded")
    assert receiver.calls_to("/failed") == []
    assert report["type"] == "job.succeeded"
    assert report["job_id"] == job["id"] and report["name"] == "export"
    assert report["state"] == "succeeded" and report["attempts"] == 1
    assert report["status_code"] == 200 and report["response_excerpt"] == "done"
    assert report["error"] is None and report["schedule_id"] is None
    # The report is a job of its own, found by the group the source names; it ended too.
    listed = http.get("/v1/jobs", params={"group": job["callbacks_group"]}).json()["jobs"]
    assert [(j["state"], j["target"]["url"]) for j in listed] == [
        ("succeeded", receiver.url("/succeeded"))
    ]
    assert listed[0]["callbacks_group"] is None  # a report reports nothing further
    served.clock.advance(timedelta(days=1))
    served.deliver()
    assert len(receiver.calls_to("/succeeded")) == 1


def test_a_final_failure_is_reported_after_the_last_retry_only(
    served: Served, receiver: Receiver, http: httpx.Client
) -> None:
    job = create(
        http,
        receiver,
        "/busy",
        retry={"max_attempts": 3, "min_backoff_seconds": 1, "max_backoff_seconds": 10},
    )
    served.deliver()
    for _ in range(2):
        assert receiver.calls_to("/failed") == []  # a retried attempt is not an end
        served.clock.advance(timedelta(minutes=1))
        served.deliver()
    (report,) = receiver.calls_to("/failed")
    assert report["type"] == "job.failed" and report["state"] == "failed"
    assert report["attempts"] == 3 and report["status_code"] == 503
    assert report["error"].endswith("(attempts spent: 3 of 3)")
    assert receiver.calls_to("/succeeded") == []
    assert len([c for c in receiver.calls if c[0] == "/busy"]) == 3
    assert http.get(f"/v1/jobs/{job['id']}").json()["state"] == "failed"


def test_a_cancelled_job_reports_nothing(
    served: Served, receiver: Receiver, http: httpx.Client
) -> None:
    job = create(http, receiver, "/ok", delay_seconds=3600)
    assert http.delete(f"/v1/jobs/{job['id']}").json()["state"] == "cancelled"
    served.clock.advance(timedelta(hours=2))
    served.deliver()
    assert receiver.calls == []


def test_a_schedule_jobs_inherit_its_callbacks(
    served: Served, receiver: Receiver, http: httpx.Client
) -> None:
    created = http.post(
        "/v1/schedules",
        json={
            "cron": "* * * * *",
            "timezone": "UTC",
            "target": {"url": receiver.url("/gone")},
            "failure_callback": receiver.url("/failed"),
        },
    )
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert schedule["failure_callback"] == receiver.url("/failed")
    assert schedule["callback"] is None
    served.scheduler.materialise()
    served.clock.advance(timedelta(minutes=1))
    served.deliver()
    (report,) = receiver.calls_to("/failed")
    assert report["schedule_id"] == schedule["id"] and report["status_code"] == 404


@pytest.mark.parametrize("field_name", ["callback", "failure_callback"])
def test_a_callback_url_the_ssrf_guard_refuses_is_a_422_naming_it(
    make_api: Callable[..., Api], field_name: str
) -> None:
    api = make_api(ssrf=SsrfGuard())
    http = api.http(api.tenant())
    job = {"delay_seconds": 60, "target": {"url": "https://example.com/hook"}}
    refused = http.post("/v1/jobs", json={**job, field_name: "http://127.0.0.1:8080/cb"})
    problem = assert_problem(refused, 422, field_name)
    assert "SSRF" in problem["detail"]
    schedule = {"cron": "0 * * * *", "timezone": "UTC", "target": job["target"]}
    refused = http.post("/v1/schedules", json={**schedule, field_name: "http://10.0.0.1/cb"})
    assert_problem(refused, 422, field_name)
    not_http = http.post("/v1/jobs", json={**job, field_name: "ftp://example.com/cb"})
    assert_problem(not_http, 422, field_name)


def test_dead_letters_are_listed_a_page_at_a_time_and_redriven(
    served: Served, receiver: Receiver, http: httpx.Client
) -> None:
    failed = [create(http, receiver, "/gone", name=f"dead-{n}")["id"] for n in range(3)]
    create(http, receiver, "/ok")
    served.deliver()
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"state": "failed", "limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        page = http.get("/v1/jobs", params=params).json()
        assert len(page["jobs"]) <= 2
        seen += [j["id"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(failed)
    assert_problem(http.get("/v1/jobs", params={"state": "failed", "dead": "1"}), 400, "dead")

    redriven = http.post(f"/v1/jobs/{failed[0]}/retry")
    assert redriven.status_code == 200, redriven.text
    again = redriven.json()
    assert again["state"] == "scheduled" and again["finished_at"] is None
    assert again["attempts"] == 1 and again["retry"]["max_attempts"] == 6  # 5 more after one
    served.deliver()  # it fails again: a second report, and a second run in its log
    runs = http.get(f"/v1/jobs/{failed[0]}/runs").json()["runs"]
    assert [r["attempt"] for r in runs] == [1, 2]
    reports = [r for r in receiver.calls_to("/failed") if r["job_id"] == failed[0]]
    assert [r["attempts"] for r in reports] == [1, 2]


def test_only_a_failed_job_is_redriven(
    served: Served, receiver: Receiver, http: httpx.Client
) -> None:
    waiting = create(http, receiver, "/ok", delay_seconds=3600)
    problem = assert_problem(http.post(f"/v1/jobs/{waiting['id']}/retry"), 409)
    assert "scheduled" in problem["detail"] and "only a failed job" in problem["detail"]
    assert_problem(http.post("/v1/jobs/no-such-job/retry"), 404)
