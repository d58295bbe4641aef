"""`recoup jobs list|show` and `recoup schedules list` never hand a terminal a control
character from a record (issue 24: a job name with ESC rewrote the screen): names made before
names refused them, run errors and targets are printed with controls escaped (`\\x1b`), and as
plain text, never as Rich markup. New names with control characters are refused."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from recoup.errors import InvalidInput
from recoup.jobs.model import NewJob
from recoup.jobs.scheduler import Scheduler
from recoup.storage import Store
from recoup.timekeeping.clock import SystemClock
from tests.cli.test_cli_jobs import TARGET, cli, db, scheduler, store  # noqa: F401

EVIL = "inv\x1b[2J\x1b]0;owned\x07[red]x[/red]\x9b"


def stored_with_evil_name(store: Store) -> str:  # noqa: F811
    # As a store written before names refused control characters holds it.
    job = store.insert(
        NewJob(run_at=store_now(), target=TARGET, name=EVIL, group=EVIL), now=store_now()
    )
    return job.id


def store_now() -> datetime:
    return SystemClock().now() + timedelta(hours=1)


@pytest.mark.parametrize("command", ["list", "show"])
def test_a_stored_name_with_control_characters_is_printed_escaped(
    capsys: pytest.CaptureFixture[str],
    db: str,  # noqa: F811
    store: Store,  # noqa: F811
    command: str,
) -> None:
    job_id = stored_with_evil_name(store)
    argv = ["jobs", "list"] if command == "list" else ["jobs", "show", job_id]
    code, out, err = cli(capsys, db, *argv)
    assert code == 0, err
    assert not any(c in out for c in "\x1b\x07\x9b")
    assert "\\x1b[2J" in out  # escaped (a list's narrow column may cut what follows)
    if command == "show":
        assert "[red]x[/red]" in out and "\\x9b" in out  # plain text, not Rich markup


def test_a_new_name_with_a_control_character_is_refused(scheduler: Scheduler) -> None:  # noqa: F811
    with pytest.raises(InvalidInput, match="control") as refused:
        scheduler.enqueue(TARGET, delay=timedelta(hours=1), name="a\x1bb")
    assert refused.value.field == "name"
