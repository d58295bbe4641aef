"""`recoup jobs list --metadata` and `recoup schedules list --metadata / --state ended` on
SQLite: the filter, what the records show, and bad input (one line naming the option, exit 2)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from recoup.jobs.changes import ScheduleChange
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.schedules.model import CronRule, NewSchedule
from tests.cli.test_cli_jobs import TARGET, as_json, cli, db, schedule_jobs, scheduler, store

__all__ = ["db", "scheduler", "store"]  # the fixtures, from test_cli_jobs

RULE = CronRule(expression="0 9 * * *", timezone="UTC")


def test_jobs_list_filters_by_every_metadata_pair(
    capsys: pytest.CaptureFixture[str], db: str, scheduler: Scheduler
) -> None:
    (eu_one,) = schedule_jobs(scheduler, "a", metadata={"region": "eu", "order": "1"})
    (eu_two,) = schedule_jobs(scheduler, "b", metadata={"region": "eu", "order": "2"})
    schedule_jobs(scheduler, "c", metadata={"region": "us"})
    listed = as_json(capsys, db, "jobs", "list", "--metadata", "region=eu")
    assert {j["id"] for j in listed["jobs"]} == {eu_one, eu_two}
    assert {j["metadata"]["order"] for j in listed["jobs"]} == {"1", "2"}
    both = as_json(capsys, db, "jobs", "list", "--metadata", "region=eu", "--metadata", "order=2")
    assert [j["id"] for j in both["jobs"]] == [eu_two]
    # A value may hold '=': only the first one splits.
    (equals,) = schedule_jobs(scheduler, "d", metadata={"q": "a=b"})
    assert [
        j["id"] for j in as_json(capsys, db, "jobs", "list", "--metadata", "q=a=b")["jobs"]
    ] == [equals]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--metadata", "region"], "KEY=VALUE"),
        (["--metadata", "a b=1"], "A–Z"),
        (["--metadata", "a=1", "--metadata", "a=2"], "twice"),
        (["--metadata", "k=" + "v" * 501], "500"),
    ],
)
def test_a_bad_metadata_option_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], db: str, scheduler: Scheduler, argv: list[str], said: str
) -> None:
    for group in ("jobs", "schedules"):
        code, out, err = cli(capsys, db, group, "list", *argv)
        assert code == 2, (out, err)
        assert "--metadata" in err and said in err
        assert len(err.strip().splitlines()) == 1


def test_schedules_list_filters_by_metadata_and_shows_ended_ones(
    capsys: pytest.CaptureFixture[str], db: str, scheduler: Scheduler
) -> None:
    ops = scheduler.create_schedule(
        NewSchedule(name="ops", rule=RULE, target=TARGET, metadata={"team": "ops"})
    )
    other = scheduler.create_schedule(NewSchedule(name="other", rule=RULE, target=TARGET))
    listed = as_json(capsys, db, "schedules", "list", "--metadata", "team=ops")
    assert [s["id"] for s in listed["schedules"]] == [ops.id]
    assert listed["schedules"][0]["metadata"] == {"team": "ops"}
    scheduler.update_schedule(other.id, ScheduleChange(end_at=datetime(2020, 1, 1, tzinfo=UTC)))
    ended = as_json(capsys, db, "schedules", "list", "--state", "ended")
    assert [(s["id"], s["state"]) for s in ended["schedules"]] == [(other.id, "ended")]
    active = as_json(capsys, db, "schedules", "list", "--state", "active")
    assert [s["id"] for s in active["schedules"]] == [ops.id]
    code, out, _ = cli(capsys, db, "schedules", "list")
    assert code == 0 and "ended" in out


def test_a_window_shows_in_the_schedule_record(
    capsys: pytest.CaptureFixture[str], db: str, scheduler: Scheduler
) -> None:
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    s = scheduler.create_schedule(
        dataclasses.replace(
            NewSchedule(name="w", rule=RULE, target=TARGET),
            start_at=start,
            end_at=start + timedelta(days=2),
        )
    )
    shown = as_json(capsys, db, "schedules", "show", s.id)
    assert shown["schedule"]["start_at"] == start.isoformat().replace("+00:00", "Z")
    assert len(shown["upcoming"]) == 2  # one a day inside the window
