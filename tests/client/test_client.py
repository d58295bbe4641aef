"""The Python client: every endpoint against a real server, typed errors, and retries that
reuse one Idempotency-Key."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from recoup import client as client_module
from recoup.client import (
    Client,
    ConflictError,
    NotFoundError,
    ServerError,
    TransportFailure,
    Unauthorized,
    Unprocessable,
)
from tests.api.conftest import TARGET, Api


@pytest.fixture(autouse=True)
def no_backoff_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", slept.append)
    return slept


def test_the_client_covers_every_endpoint(api: Api) -> None:
    caller = api.tenant()
    with Client(api.url, caller.token) as recoup:
        run_at = datetime.now(UTC) + timedelta(hours=1)
        job = recoup.create_job(
            TARGET, run_at=run_at, name="inv-1", body={"invoice": 1}, retry={"max_attempts": 2}
        )
        assert job.run_at == run_at and job.retry.max_attempts == 2
        recoup.create_job(TARGET, delay_seconds=3600, name="inv-2")
        assert recoup.get_job(job.id) == job
        assert {j.name for j in recoup.iter_jobs(page_size=1)} == {"inv-1", "inv-2"}
        assert recoup.list_jobs(name_prefix="inv-2").jobs[0].name == "inv-2"
        assert recoup.runs(job.id) == []
        assert recoup.cancel_job(job.id).state == "cancelled"
        assert recoup.cancel_jobs(name_prefix="inv-") == 1

        schedule = recoup.create_schedule(TARGET, cron="0 9 * * 1-5", timezone="Europe/Paris")
        assert [s.id for s in recoup.list_schedules()] == [schedule.id]
        assert recoup.get_schedule(schedule.id).cron == "0 9 * * 1-5"
        assert len(recoup.upcoming(schedule.id, 3)) == 3
        assert recoup.pause_schedule(schedule.id).paused
        assert not recoup.resume_schedule(schedule.id).paused
        anchored = recoup.create_schedule(
            TARGET, anchor={"local": "2026-01-31T09:00:00", "timezone": "America/New_York"}
        )
        assert anchored.anchor is not None and anchored.anchor.every == "month"
        recoup.delete_schedule(schedule.id)
        assert recoup.ready()


def test_the_calls_the_command_line_needs_of_a_server(api: Api) -> None:
    caller = api.tenant()
    with Client(api.url, caller.token) as recoup:
        assert recoup.tenant() == caller.tenant
        job = recoup.create_job(TARGET, delay_seconds=3600, name="a")
        page = recoup.list_runs(job.id, limit=1)
        assert (page.runs, page.next_cursor) == ([], None)
        for name in ("s-1", "s-2"):
            recoup.create_schedule(TARGET, cron="0 9 * * *", timezone="UTC", name=name)
        first = recoup.schedules_page(limit=1)
        assert [s.name for s in first.schedules] == ["s-1"] and first.next_cursor is not None
        rest = recoup.schedules_page(limit=1, cursor=first.next_cursor)
        assert [s.name for s in rest.schedules] == ["s-2"]
        counted = recoup.redrive_jobs(name_prefix="a", since="2020-01-01T00:00:00Z", dry_run=True)
        assert (counted.matched, counted.redriven, counted.dry_run) == (0, 0, True)
        assert counted.filter["name_prefix"] == "a"


def test_errors_are_typed_and_carry_the_problem(api: Api) -> None:
    with Client(api.url, api.tenant().token) as recoup:
        with pytest.raises(NotFoundError) as missing:
            recoup.get_job("nope")
        assert missing.value.status == 404 and missing.value.problem["status"] == 404
        with pytest.raises(Unprocessable) as invalid:
            recoup.create_job("ftp://example.com/", delay_seconds=1)
        assert invalid.value.fields == ["target.url"]
        recoup.create_job(TARGET, delay_seconds=60, name="dup")
        with pytest.raises(ConflictError):
            recoup.create_job(TARGET, delay_seconds=60, name="dup")
    with Client(api.url, "rcp_wrong") as stranger, pytest.raises(Unauthorized):
        stranger.list_jobs()


class LosesFirstResponse(httpx.HTTPTransport):
    """Delivers every request, but loses the response to the first POST (a timeout after
    the server committed): the case idempotency keys exist for."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method == "POST":
            self.keys.append(request.headers["Idempotency-Key"])
            if len(self.keys) == 1:
                response.read()
                response.close()
                raise httpx.ReadTimeout("lost on the way back", request=request)
        return response


def test_a_post_whose_response_was_lost_is_retried_with_the_same_key(api: Api) -> None:
    transport = LosesFirstResponse()
    with Client(api.url, api.tenant().token, transport=transport) as recoup:
        job = recoup.create_job(TARGET, delay_seconds=60, name="exactly-once")
        assert len(transport.keys) == 2 and transport.keys[0] == transport.keys[1]
        assert [j.id for j in recoup.iter_jobs()] == [job.id]


def scripted(replies: list[Any], seen: list[httpx.Request]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        assert isinstance(reply, httpx.Response)
        return reply

    return httpx.MockTransport(handler)


def job_json() -> dict[str, Any]:
    now = "2026-01-01T00:00:00Z"
    return {
        "id": "j1", "name": None, "state": "scheduled", "run_at": now,
        "target": {"kind": "http", "url": TARGET}, "attempts": 0, "last_error": None,
        "retry": {"max_attempts": 5, "min_backoff_seconds": 1, "max_backoff_seconds": 60},
        "timeout_seconds": 30, "schedule_id": None, "created_at": now, "updated_at": now,
        "finished_at": None,
    }  # fmt: skip


def test_timeouts_connection_errors_and_5xx_are_retried_with_one_key(
    no_backoff_sleep: list[float],
) -> None:
    seen: list[httpx.Request] = []
    replies: list[Any] = [
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
        httpx.Response(503, json={"status": 503, "detail": "db down"}),
        httpx.Response(409, json={"type": "urn:recoup:problem:idempotency-key-in-use"},
                       headers={"Retry-After": "1"}),
        httpx.Response(201, json=job_json()),
    ]  # fmt: skip
    with Client("http://recoup.test", "rcp_x", transport=scripted(replies, seen)) as recoup:
        assert recoup.create_job(TARGET, delay_seconds=1).id == "j1"
    keys = {r.headers["Idempotency-Key"] for r in seen}
    assert len(seen) == 5 and len(keys) == 1
    assert len(no_backoff_sleep) == 4 and no_backoff_sleep[3] >= 1.0  # Retry-After honoured


def test_retries_are_bounded(no_backoff_sleep: list[float]) -> None:
    seen: list[httpx.Request] = []
    replies: list[Any] = [httpx.Response(500, json={"detail": "boom"}) for _ in range(3)]
    with (
        Client("http://recoup.test", "rcp_x", retries=2, transport=scripted(replies, seen)) as c,
        pytest.raises(ServerError) as caught,
    ):
        c.get_job("j1")
    assert caught.value.status == 500 and len(seen) == 3
    replies = [httpx.ConnectError("refused") for _ in range(3)]
    with (
        Client("http://recoup.test", "rcp_x", retries=2, transport=scripted(replies, seen)) as c,
        pytest.raises(TransportFailure),
    ):
        c.create_job(TARGET, delay_seconds=1)


def test_client_errors_are_not_retried(no_backoff_sleep: list[float]) -> None:
    seen: list[httpx.Request] = []
    replies: list[Any] = [httpx.Response(422, json={"errors": [{"field": "name", "message": "x"}]})]
    with (
        Client("http://recoup.test", "rcp_x", transport=scripted(replies, seen)) as recoup,
        pytest.raises(Unprocessable) as caught,
    ):
        recoup.create_job(TARGET, delay_seconds=1)
    assert caught.value.fields == ["name"] and len(seen) == 1 and no_backoff_sleep == []


def test_client_errors_are_the_domain_errors_too() -> None:
    from recoup.client import ConflictError, NotFoundError
    from recoup.errors import Conflict, NotFound

    assert issubclass(NotFoundError, NotFound) and issubclass(ConflictError, Conflict)
    assert NotFoundError(404, "no job").status == 404


# -- What the API accepts, the client accepts; what the API says, the client's errors say ----


def test_run_at_may_be_rfc_3339_text_as_the_api_takes_it(api: Api) -> None:
    with Client(api.url, api.tenant().token) as recoup:
        job = recoup.create_job(TARGET, run_at="2030-01-01T09:00:00+01:00")
        assert job.run_at == datetime(2030, 1, 1, 8, 0, tzinfo=UTC)
        past = recoup.create_job(TARGET, run_at="2001-01-01T00:00:00Z", allow_past=True)
        assert past.run_at == datetime(2001, 1, 1, tzinfo=UTC)


def test_a_naive_run_at_is_a_value_error_naming_the_field_before_any_request() -> None:
    sent: list[httpx.Request] = []
    transport = httpx.MockTransport(lambda request: sent.append(request) or httpx.Response(500))
    with Client("http://recoup.invalid", "rcp_x", transport=transport) as recoup:
        with pytest.raises(ValueError, match=r"^run_at: expected an aware datetime"):
            recoup.create_job(TARGET, run_at=datetime(2030, 1, 1, 9, 0))
        with pytest.raises(ValueError, match=r"^failed_at: expected an aware datetime"):
            recoup.report_failure(
                invoice_id="i",
                customer_id="c",
                amount=100,
                currency="usd",
                failed_at=datetime(2030, 1, 1),
                timezone="UTC",
            )
    assert sent == []


def test_the_error_message_carries_the_problems_detail(api: Api) -> None:
    with Client(api.url, api.tenant().token) as recoup:
        with pytest.raises(Unprocessable) as refused:
            recoup.create_job(TARGET, delay_seconds=60, timeout_seconds=-1)
        assert str(refused.value) == "422: timeout_seconds: expected a number ≥ 0.001, got -1"
        with pytest.raises(Unprocessable) as past:
            recoup.create_job(TARGET, run_at="2001-01-01T00:00:00Z")
        assert "run_at" in str(past.value) and "allow_past" in str(past.value)


def test_a_reason_only_in_errors_still_reaches_the_message() -> None:
    # A server from before details said why: "invalid: run_at", the reason in errors[].
    answer = {
        "type": "urn:recoup:problem:invalid-input",
        "status": 422,
        "detail": "invalid: run_at",
        "errors": [{"field": "run_at", "message": "Value error, expected RFC 3339"}],
    }
    transport = httpx.MockTransport(lambda request: httpx.Response(422, json=answer))
    with Client("http://recoup.invalid", "rcp_x", transport=transport) as recoup:
        with pytest.raises(Unprocessable) as refused:
            recoup.create_job(TARGET, delay_seconds=1)
    assert str(refused.value) == "422: invalid: run_at; run_at: expected RFC 3339"
