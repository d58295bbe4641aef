"""`recoup jobs …` and `recoup schedules …` on SQLite: what they print (tables, `--json`),
what they change, and their errors (bad input: one line naming the option, exit 2; an unknown
id: one line, exit 2)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from recoup.jobs.model import HttpTarget, JobState, RunOutcome
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.schedules.model import CronRule, MissedPolicy, NewSchedule
from recoup.jobs.ssrf import SsrfGuard
from recoup.storage import Store, open_store
from recoup.timekeeping.clock import SystemClock
from tests.cli.test_cli import run
from tests.storage.test_store_contract import claim, report

TARGET = HttpTarget(url="http://127.0.0.1:9/hook")


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'recoup.db'}"


@pytest.fixture
def store(db: str) -> Iterator[Store]:
    opened = open_store(db)
    yield opened
    opened.close()


@pytest.fixture
def scheduler(store: Store) -> Scheduler:
    return Scheduler(store, clock=SystemClock(), ssrf=SsrfGuard(allow_private=True))


def schedule_jobs(scheduler: Scheduler, *names: str, **fields: Any) -> list[str]:
    return [scheduler.enqueue(TARGET, delay=timedelta(hours=1), name=n, **fields).id for n in names]


def cli(capsys: pytest.CaptureFixture[str], db: str, *argv: str) -> tuple[int, str, str]:
    return run(capsys, *argv, "--db", db)


def as_json(capsys: pytest.CaptureFixture[str], db: str, *argv: str) -> Any:
    code, out, err = cli(capsys, db, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


# recoup jobs list


def test_jobs_list_filters_and_pages_as_the_api_does(
    scheduler: Scheduler, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second, third = schedule_jobs(scheduler, "inv-1", "inv-10", "other")
    scheduler.cancel(second)
    page = as_json(capsys, db, "jobs", "list", "--limit", "2")
    assert [j["id"] for j in page["jobs"]] == [third, second]  # newest first
    rest = as_json(capsys, db, "jobs", "list", "--limit", "2", "--cursor", page["next_cursor"])
    assert [j["id"] for j in rest["jobs"]] == [first] and rest["next_cursor"] is None
    assert [j["id"] for j in as_json(capsys, db, "jobs", "list", "--name", "inv-1")["jobs"]] == [
        first
    ]
    prefixed = as_json(capsys, db, "jobs", "list", "--name-prefix", "inv-", "--state", "scheduled")
    assert [j["id"] for j in prefixed["jobs"]] == [first]
    job = page["jobs"][0]
    assert job["state"] == "scheduled" and job["target"]["url"] == TARGET.url
    assert "headers" not in job["target"]  # headers may carry credentials


def test_jobs_list_prints_a_table_and_the_next_cursor(
    scheduler: Scheduler, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = schedule_jobs(scheduler, "a", "b", group="inv_7")
    code, out, err = cli(capsys, db, "jobs", "list", "--group", "inv_7", "--limit", "1")
    assert code == 0, err
    assert "Jobs of default (1)" in out and ids[1] in out and ids[0] not in out
    assert "more: --cursor " in out


def test_jobs_of_another_tenant_are_not_listed_and_an_unknown_tenant_is_an_error(
    scheduler: Scheduler, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    schedule_jobs(scheduler, "mine")
    code, _, err = cli(capsys, db, "jobs", "list", "--tenant", "acme")
    assert code == 2 and "no tenant 'acme'" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["jobs", "list", "--state", "done"], "--state"),
        (["jobs", "list", "--limit", "0"], "--limit"),
        (["jobs", "list", "--limit", "1001"], "--limit"),
        (["jobs", "list", "--cursor", "page-2"], "--cursor"),
        (["jobs", "list", "--name", ""], "--name"),
        (["jobs", "list", "--name-prefix", "x" * 201], "--name-prefix"),
        (["jobs", "show"], "JOB_ID or --name"),
        (["jobs", "cancel", "j1", "--name", "n"], "JOB_ID or --name"),
        (["jobs", "runs", "j1", "--cursor", "x"], "--cursor"),
        (["schedules", "list", "--state", "stopped"], "--state"),
        (["schedules", "list", "--limit", "-1"], "--limit"),
        (["schedules", "show", "s1", "--count", "101"], "--count"),
        (["schedules", "pause"], "SCHEDULE_ID or --name"),
    ],
)
def test_bad_input_is_one_line_naming_the_option_and_exit_2(
    scheduler: Scheduler,
    db: str,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    named: str,
) -> None:
    schedule_jobs(scheduler, "j")  # `runs` looks the job up before reading its log
    code, out, err = cli(capsys, db, *argv)
    assert code == 2, (out, err)
    assert named in err and err.count("\n") == 1 and "Traceback" not in err


# recoup jobs show / runs / cancel


def test_jobs_show_prints_the_job_and_its_runs_by_id_or_name(
    scheduler: Scheduler, store: Store, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (job_id,) = schedule_jobs(scheduler, "nightly")
    later = SystemClock().now() + timedelta(hours=2)
    (claimed,) = claim(store, now=later)
    store.complete_many(
        [report(claimed, RunOutcome.RETRY, at=later, retry_at=later, error="HTTP 503")],
        now=later,
    )
    shown = as_json(capsys, db, "jobs", "show", job_id)
    assert shown["job"]["id"] == job_id and shown["job"]["attempts"] == 1
    assert [(r["attempt"], r["outcome"], r["error"]) for r in shown["runs"]] == [
        (1, "retry", "HTTP 503")
    ]
    assert as_json(capsys, db, "jobs", "show", "--name", "nightly") == shown
    code, out, err = cli(capsys, db, "jobs", "show", job_id)
    assert code == 0, err
    attempts = f"1/{shown['job']['max_attempts']}"
    assert f"Job {job_id}" in out and "HTTP 503" in out and attempts in out


def test_jobs_runs_pages_the_run_log(
    scheduler: Scheduler, store: Store, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (job_id,) = schedule_jobs(scheduler, "flaky")
    now = SystemClock().now() + timedelta(hours=2)
    for outcome in (RunOutcome.RETRY, RunOutcome.RETRY, RunOutcome.SUCCEEDED):
        (claimed,) = claim(store, now=now)
        store.complete_many([report(claimed, outcome, at=now, retry_at=now)], now=now)
    page = as_json(capsys, db, "jobs", "runs", job_id, "--limit", "2")
    assert [r["attempt"] for r in page["runs"]] == [1, 2] and page["next_cursor"] == "2"
    rest = as_json(capsys, db, "jobs", "runs", job_id, "--cursor", "2")
    assert [r["outcome"] for r in rest["runs"]] == ["succeeded"] and rest["next_cursor"] is None


def test_an_unknown_job_is_exit_2_with_one_line(
    scheduler: Scheduler, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["jobs", "show", "nope"], ["jobs", "runs", "nope"], ["jobs", "cancel", "nope"]):
        code, _, err = cli(capsys, db, *argv)
        assert code == 2 and err == "error: no job 'nope'\n", argv
    code, _, err = cli(capsys, db, "jobs", "show", "--name", "nobody")
    assert code == 2 and "no job named 'nobody'" in err


def test_jobs_cancel_by_id_and_by_name(
    scheduler: Scheduler, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    by_id, by_name = schedule_jobs(scheduler, "a", "b")
    cancelled = as_json(capsys, db, "jobs", "cancel", by_id)
    assert cancelled["id"] == by_id and cancelled["state"] == "cancelled"
    code, out, _ = cli(capsys, db, "jobs", "cancel", by_id)  # again: left as it is
    assert code == 0 and "already ended" in out
    assert as_json(capsys, db, "jobs", "cancel", "--name", "b") == {"cancelled": 1}
    assert as_json(capsys, db, "jobs", "cancel", "--name", "b") == {"cancelled": 0}
    assert scheduler.get(by_name).state is JobState.CANCELLED


def test_jobs_retry_redrives_a_failed_job_and_refuses_any_other(
    scheduler: Scheduler, store: Store, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    failed, waiting = schedule_jobs(scheduler, "dead", "alive")
    now = SystemClock().now()
    (claimed,) = [j for j in claim(store, now=now + timedelta(hours=2)) if j.id == failed]
    store.complete_many([report(claimed, RunOutcome.FAILED, at=now)], now=now)
    again = as_json(capsys, db, "jobs", "retry", failed)
    assert again["id"] == failed and again["state"] == "scheduled"
    assert again["attempts"] == 1 and again["max_attempts"] == 6  # five more after one
    assert again["finished_at"] is None
    code, _, err = cli(capsys, db, "jobs", "retry", failed)  # scheduled now: not failed
    assert code == 1 and err.count("\n") == 1
    assert "is scheduled; only a failed job can be retried" in err
    code, _, err = cli(capsys, db, "jobs", "retry", waiting)  # claimed: running
    assert code == 1 and "is running" in err
    code, _, err = cli(capsys, db, "jobs", "retry", "no-such-job")
    assert code == 2 and "no-such-job" in err


# recoup schedules …


def make_schedule(scheduler: Scheduler, name: str) -> str:
    rule = CronRule(expression="30 2 * * *", timezone="America/New_York")
    new = NewSchedule(name=name, rule=rule, target=TARGET, missed=MissedPolicy.SKIP)
    return scheduler.create_schedule(new).id


def test_schedules_list_pause_resume_and_filter(
    scheduler: Scheduler, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = {name: make_schedule(scheduler, name) for name in ("weekly", "nightly", "monthly")}
    page = as_json(capsys, db, "schedules", "list", "--limit", "2")
    assert [s["name"] for s in page["schedules"]] == ["monthly", "nightly"]
    assert page["next_cursor"] == "nightly"
    paused = as_json(capsys, db, "schedules", "pause", ids["nightly"])
    assert paused["paused"] is True
    code, out, _ = cli(capsys, db, "schedules", "pause", "--name", "weekly")
    assert code == 0 and f"schedule weekly ({ids['weekly']}): paused" in out
    listed = as_json(capsys, db, "schedules", "list", "--state", "paused")
    assert [s["name"] for s in listed["schedules"]] == ["nightly", "weekly"]
    resumed = as_json(capsys, db, "schedules", "resume", "--name", "nightly")
    assert resumed["paused"] is False and resumed["next_fire_at"] is not None
    active = as_json(capsys, db, "schedules", "list", "--state", "active")
    assert [s["name"] for s in active["schedules"]] == ["monthly", "nightly"]
    named = as_json(capsys, db, "schedules", "list", "--name", "weekly")
    assert [s["id"] for s in named["schedules"]] == [ids["weekly"]]
    code, out, err = cli(capsys, db, "schedules", "list")
    assert code == 0, err
    assert "Schedules of default (3)" in out and "cron 30 2 * * *" in out and "paused" in out


def test_schedules_show_prints_its_next_occurrences(
    scheduler: Scheduler, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    schedule_id = make_schedule(scheduler, "nightly")
    shown = as_json(capsys, db, "schedules", "show", schedule_id, "--count", "3")
    assert shown["schedule"]["cron"] == "30 2 * * *"
    upcoming = shown["upcoming"]
    assert len(upcoming) == 3 and upcoming == sorted(upcoming)
    assert upcoming[0] == shown["schedule"]["next_fire_at"]
    code, out, err = cli(capsys, db, "schedules", "show", "--name", "nightly")
    assert code == 0, err
    assert "Next 5 occurrences" in out and "America/New_York" in out and "02:30" in out


def test_an_unknown_or_deleted_schedule_is_exit_2(
    scheduler: Scheduler, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = make_schedule(scheduler, "gone")
    scheduler.delete_schedule(gone)
    for argv in (["schedules", "show", gone], ["schedules", "resume", "nope"]):
        code, _, err = cli(capsys, db, *argv)
        assert code == 2 and "no schedule" in err and err.count("\n") == 1, argv
    code, _, err = cli(capsys, db, "schedules", "pause", "--name", "gone")
    assert code == 2 and "no schedule named 'gone'" in err


def test_piped_tables_keep_every_id_whole_on_its_line(
    capsys: pytest.CaptureFixture[str], db: str, scheduler: Scheduler
) -> None:
    long_name = "a-job-whose-name-is-long-enough-to-push-the-id-past-eighty-columns-" * 2
    [job_id] = schedule_jobs(scheduler, long_name)
    code, out, _ = cli(capsys, db, "jobs", "list")
    assert code == 0
    assert any(job_id in line and long_name in line for line in out.splitlines())


def test_a_groups_jobs_are_listed_in_the_order_they_run(
    capsys: pytest.CaptureFixture[str], db: str, scheduler: Scheduler
) -> None:
    # Created together (an invoice's attempts): newest-first would be any order.
    for n in (3, 1, 4, 2):
        scheduler.enqueue(TARGET, delay=timedelta(days=n), name=f"retry-{n}", group="g")
    code, out, _ = cli(capsys, db, "jobs", "list", "--group", "g")
    assert code == 0
    order = [int(line.split("retry-")[1][0]) for line in out.splitlines() if "retry-" in line]
    assert order == [1, 2, 3, 4]
