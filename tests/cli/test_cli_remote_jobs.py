"""`recoup jobs …` and `recoup schedules …` with `--url` and `--token`: against a real server
(one per module and backend), each command prints what it prints on the server's database
with `--db`, acts on the server's store, and turns the server's refusals into one line (exit
2 for a 4xx, 1 for a 5xx or no answer) that never holds the token."""

from __future__ import annotations

import json
import logging
import sys
from datetime import timedelta
from typing import Any

import pytest

from recoup.jobs.model import HttpTarget, JobState, RunOutcome
from recoup.jobs.schedules.model import CronRule, MissedPolicy, NewSchedule
from recoup.timekeeping.clock import SystemClock
from tests.cli.remote_server import Served, Tenant, served
from tests.cli.test_cli import run
from tests.storage.test_store_contract import claim, report
from tests.support import ServerThread, free_socket

__all__ = ["served"]

TARGET = HttpTarget(url="http://127.0.0.1:9/hook")


def both(capsys: pytest.CaptureFixture[str], tenant: Tenant, *argv: str) -> tuple[str, str]:
    """What the command prints on the database and through the server, each exiting 0."""
    printed = []
    for where in (tenant.local, tenant.remote):
        code, out, err = run(capsys, *argv, *where)
        assert code == 0, err
        printed.append(out)
    return printed[0], printed[1]


def remote_json(capsys: pytest.CaptureFixture[str], tenant: Tenant, *argv: str) -> Any:
    code, out, err = run(capsys, *argv, *tenant.remote, "--json")
    assert code == 0, err
    return json.loads(out)


def refused(capsys: pytest.CaptureFixture[str], tenant: Tenant, *argv: str, code: int = 2) -> str:
    """The one line a remote command printed on stderr, exiting with `code`."""
    exited, out, err = run(capsys, *argv, *tenant.remote)
    assert (exited, out) == (code, ""), err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert tenant.token not in err
    return err


def failed_job(served: Served, tenant: Tenant, name: str) -> str:
    """A job of `tenant` that failed for good, a day ago (claimed at its own instant, so no
    other test's job, due later, is claimed with it)."""
    at = SystemClock().now() - timedelta(days=1)
    job = served.scheduler().enqueue(TARGET, run_at=at, name=name, tenant=tenant.name)
    (claimed,) = claim(served.store, now=at)
    assert claimed.id == job.id
    done = report(claimed, RunOutcome.FAILED, at=at, error="HTTP 503", status_code=503)
    served.store.complete_many([done], now=at)
    return job.id


def test_jobs_list_show_and_runs_print_the_same_through_the_server(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    scheduler = served.scheduler()
    for n in (1, 2, 3):
        scheduler.enqueue(
            TARGET,
            delay=timedelta(hours=n),
            name=f"retry-inv-{n}",
            group="inv",
            metadata={"invoice": "inv"},
            tenant=tenant.name,
        )
    dead = failed_job(served, tenant, "dead")
    for argv in (
        ["jobs", "list", "--json"],
        ["jobs", "list", "--group", "inv"],  # an invoice's attempts: by the order they run
        ["jobs", "list", "--metadata", "invoice=inv", "--limit", "2"],
        ["jobs", "show", dead],
        ["jobs", "show", "--name", "retry-inv-2", "--json"],
        ["jobs", "runs", dead],
    ):
        local, remote = both(capsys, tenant, *argv)
        assert local == remote, argv
    listed = remote_json(capsys, tenant, "jobs", "list")
    assert len(listed["jobs"]) == 4 and listed["next_cursor"] is None
    shown = remote_json(capsys, tenant, "jobs", "show", dead)
    assert shown["job"]["state"] == "failed"
    assert [(r["attempt"], r["status_code"]) for r in shown["runs"]] == [(1, 503)]
    table = run(capsys, "jobs", "list", "--group", "inv", *tenant.remote)[1]
    assert table.index("retry-inv-1") < table.index("retry-inv-2") < table.index("retry-inv-3")
    assert f"Jobs of {tenant.name}" in table  # the token's tenant, as the server says


def test_jobs_list_pages_through_the_server_by_its_cursor(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    for n in range(3):
        served.scheduler().enqueue(
            TARGET, delay=timedelta(hours=1), name=f"job-{n}", tenant=tenant.name
        )
    first = remote_json(capsys, tenant, "jobs", "list", "--limit", "2")
    rest = remote_json(
        capsys, tenant, "jobs", "list", "--limit", "2", "--cursor", first["next_cursor"]
    )
    names = [j["name"] for j in first["jobs"] + rest["jobs"]]
    assert names == ["job-2", "job-1", "job-0"] and rest["next_cursor"] is None


def test_jobs_cancel_and_retry_act_on_the_servers_jobs(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    scheduler = served.scheduler()
    waiting = scheduler.enqueue(TARGET, delay=timedelta(hours=1), tenant=tenant.name).id
    scheduler.enqueue(TARGET, delay=timedelta(hours=1), name="named", tenant=tenant.name)
    dead = failed_job(served, tenant, "dead")

    assert remote_json(capsys, tenant, "jobs", "cancel", waiting)["state"] == "cancelled"
    assert scheduler.get(waiting, tenant=tenant.name).state is JobState.CANCELLED
    code, out, _ = run(capsys, "jobs", "cancel", waiting, *tenant.remote)
    assert code == 0 and f"job {waiting} had already ended (cancelled)" in out
    assert remote_json(capsys, tenant, "jobs", "cancel", "--name", "named") == {"cancelled": 1}

    again = remote_json(capsys, tenant, "jobs", "retry", dead)
    assert (again["id"], again["state"], again["attempts"]) == (dead, "scheduled", 1)
    assert scheduler.get(dead, tenant=tenant.name).state is JobState.SCHEDULED
    # Scheduled again, it is not failed: the server's 409, in one line.
    err = refused(capsys, tenant, "jobs", "retry", dead)
    assert "409" in err and "only a failed job can be retried" in err


def test_jobs_redrive_counts_then_redrives_the_servers_failed_jobs(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    dead = failed_job(served, tenant, "dead")
    counted = remote_json(capsys, tenant, "jobs", "redrive", "--dry-run")
    assert (counted["matched"], counted["redriven"], counted["dry_run"]) == (1, 0, True)
    assert counted["filter"]["tenant"] == tenant.name
    assert served.scheduler().get(dead, tenant=tenant.name).state is JobState.FAILED
    done = remote_json(capsys, tenant, "jobs", "redrive", "--yes")
    assert (done["matched"], done["redriven"], done["dry_run"]) == (1, 1, False)
    assert served.scheduler().get(dead, tenant=tenant.name).state is JobState.SCHEDULED
    none = remote_json(capsys, tenant, "jobs", "redrive", "--yes")
    assert (none["matched"], none["redriven"], none["dry_run"]) == (0, 0, False)


def test_an_unknown_job_is_the_servers_404_in_one_line(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    for argv in (["jobs", "show", "no-such-job"], ["jobs", "cancel", "no-such-job"]):
        # The 404's detail alone: the words a database says for the same id (exit 2).
        assert refused(capsys, tenant, *argv) == "error: no job 'no-such-job'\n"
    assert "no job named 'ghost'" in refused(capsys, tenant, "jobs", "show", "--name", "ghost")


def test_the_clients_request_log_never_joins_the_refusal(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    # A process with logging set up at DEBUG on stderr (a worker's, an embedding program's).
    handler = logging.StreamHandler(sys.stderr)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        err = refused(capsys, served.tenant(), "jobs", "show", "no-such-job")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert "HTTP Request" not in err and "no-such-job" in err


def test_a_bad_token_is_the_servers_401_and_is_never_printed(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = Tenant(
        "nobody", "rcp_not-a-token", [], ["--url", served.url, "--token", "rcp_not-a-token"]
    )
    for argv in (["jobs", "list"], ["schedules", "list", "--json"]):
        assert "401" in refused(capsys, bad, *argv)


def test_an_unreachable_server_is_named_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with free_socket() as sock:  # bound, never listening: connections are refused
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        nowhere = Tenant("t", "rcp_secret", [], ["--url", url, "--token", "rcp_secret"])
        err = refused(capsys, nowhere, "jobs", "list", code=1)
    assert f"cannot reach {url}" in err


async def failing_server(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app answering every request with a 503 problem (a server whose database is
    down), or 404 for the tenant route of an old server when asked at /old."""
    if scope["type"] != "http":
        return
    old = scope["path"].startswith("/old")
    status, detail = (404, b"Not Found") if old else (503, b"the database is unreachable")
    body = b'{"type": "about:blank", "status": %d, "detail": "%s"}' % (status, detail)
    headers = [(b"content-type", b"application/problem+json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def test_a_server_error_is_one_line_with_exit_1_and_an_old_server_is_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with ServerThread(failing_server, lifespan="off") as server:
        down = Tenant("t", "rcp_secret", [], ["--url", server.url, "--token", "rcp_secret"])
        err = refused(capsys, down, "jobs", "list", code=1)
        assert "503" in err and "the database is unreachable" in err
        old = Tenant("t", "rcp_secret", [], ["--url", f"{server.url}/old", "--token", "rcp_secret"])
        assert "answers no GET /v1/tenant" in refused(capsys, old, "schedules", "list")


def test_a_password_in_the_url_is_never_printed(capsys: pytest.CaptureFixture[str]) -> None:
    with free_socket() as sock:
        url = f"http://ops:hunter2@127.0.0.1:{sock.getsockname()[1]}"
        nowhere = Tenant("t", "rcp_secret", [], ["--url", url, "--token", "rcp_secret"])
        err = refused(capsys, nowhere, "jobs", "list", code=1)
    assert "hunter2" not in err and "cannot reach http://ops:…@127.0.0.1:" in err
    code, _, err = run(capsys, "jobs", "list", "--url", url, "--token", "t", "--db", "x.db")
    assert code == 2 and "hunter2" not in err


def test_the_url_and_token_come_from_the_environment_too(
    served: Served, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = served.tenant()
    served.scheduler().enqueue(TARGET, delay=timedelta(hours=1), name="env", tenant=tenant.name)
    monkeypatch.setenv("RECOUP_URL", served.url)
    monkeypatch.setenv("RECOUP_TOKEN", tenant.token)
    code, out, err = run(capsys, "jobs", "list", "--json")
    assert code == 0, err
    assert [j["name"] for j in json.loads(out)["jobs"]] == ["env"]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--db", "sqlite:///elsewhere.db"], "--url"),  # a database and a server: which?
        (["--schema", "recoup"], "--schema"),
        (["--tenant", "someone-else"], "--tenant"),  # the token acts for another tenant
    ],
)
def test_a_server_with_database_options_or_another_tenant_is_bad_input(
    served: Served, capsys: pytest.CaptureFixture[str], extra: list[str], named: str
) -> None:
    tenant = served.tenant()
    code, out, err = run(capsys, "jobs", "list", *tenant.remote, *extra)
    assert (code, out) == (2, "") and err.count("\n") == 1 and named in err
    assert tenant.token not in err


def test_a_token_without_a_server_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "jobs", "list", "--token", "rcp_secret")
    assert code == 2 and "--token" in err and "rcp_secret" not in err


def test_the_tenant_given_with_the_tokens_own_name_is_accepted(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    code, _, err = run(capsys, "jobs", "list", *tenant.remote, "--tenant", tenant.name)
    assert code == 0, err


# recoup schedules …


def make_schedule(served: Served, tenant: Tenant, name: str) -> str:
    rule = CronRule(expression="30 2 * * *", timezone="America/New_York")
    new = NewSchedule(
        name=name, rule=rule, target=TARGET, missed=MissedPolicy.SKIP, tenant=tenant.name
    )
    return served.scheduler().create_schedule(new).id


def test_schedules_list_and_show_print_the_same_through_the_server(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    ids = {name: make_schedule(served, tenant, name) for name in ("nightly", "weekly")}
    for argv in (
        ["schedules", "list"],
        ["schedules", "show", ids["nightly"]],
        ["schedules", "show", "--name", "weekly", "--count", "3", "--json"],
    ):
        local, remote = both(capsys, tenant, *argv)
        assert local == remote, argv
    shown = remote_json(capsys, tenant, "schedules", "show", ids["nightly"], "--count", "2")
    assert shown["schedule"]["cron"] == "30 2 * * *" and len(shown["upcoming"]) == 2


def test_schedules_pause_and_resume_act_on_the_servers_schedules(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    nightly = make_schedule(served, tenant, "nightly")
    assert remote_json(capsys, tenant, "schedules", "pause", "--name", "nightly")["paused"]
    assert served.scheduler().get_schedule(nightly, tenant=tenant.name).paused
    code, out, _ = run(capsys, "schedules", "resume", nightly, *tenant.remote)
    assert code == 0 and f"schedule nightly ({nightly}): active, next at" in out
    assert not served.scheduler().get_schedule(nightly, tenant=tenant.name).paused
    listed = remote_json(capsys, tenant, "schedules", "list", "--state", "paused")
    assert listed["schedules"] == []


def test_an_unknown_schedule_is_the_servers_404_in_one_line(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    assert "no-such" in refused(capsys, tenant, "schedules", "show", "no-such")
    assert "no-such" in refused(capsys, tenant, "schedules", "pause", "no-such")
