"""`recoup jobs redrive` on SQLite: counts first (`--dry-run` stops there), asks before it
redrives unless `--yes` (a no redrives nothing, exit 1), prints what it did (`--json` as the
API answers), writes an audit line per step, and refuses a bad filter naming the option
(exit 2, one line)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from recoup.jobs.model import JobState
from recoup.storage import Store, open_store
from tests.cli.test_cli import run
from tests.storage.test_callbacks_store import T0
from tests.storage.test_redrive_contract import failed

HOUR = timedelta(hours=1)
FILTER = ("--group", "g", "--name-prefix", "sync-", "--since", "2026-03-01T12:00:00Z")


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'recoup.db'}"


@pytest.fixture
def store(db: str) -> Iterator[Store]:
    opened = open_store(db)
    yield opened
    opened.close()


@pytest.fixture
def jobs(store: Store) -> list[str]:
    return [
        failed(store, T0, name="sync-1", group="g", error="HTTP 503"),
        failed(store, T0 + HOUR, name="sync-2", group="g", error="timeout"),
        failed(store, T0 - HOUR, name="sync-0", group="g"),  # before --since
        failed(store, T0, name="other", group="g"),
    ]


def states(store: Store, ids: list[str]) -> list[JobState]:
    return [store.get("default", i).state for i in ids]  # type: ignore[union-attr]


def test_a_dry_run_counts_and_redrives_none(
    store: Store, jobs: list[str], db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "jobs", "redrive", *FILTER, "--dry-run", "--db", db)
    assert (code, out) == (0, "2 failed job(s) match; none redriven (dry run)\n")
    assert set(states(store, jobs)) == {JobState.FAILED}


def test_yes_redrives_what_the_filter_names(
    store: Store,
    jobs: list[str],
    db: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="recoup.audit"):
        code, out, err = run(
            capsys, "jobs", "redrive", *FILTER, "--error", "503", "--yes", "--json", "--db", db
        )
    assert code == 0, err
    assert json.loads(out) == {
        "matched": 1,
        "redriven": 1,
        "dry_run": False,
        "filter": {
            "tenant": "default",
            "group": "g",
            "name_prefix": "sync-",
            "error": "503",
            "since": "2026-03-01T12:00:00+00:00",
        },
    }
    assert states(store, jobs) == [JobState.SCHEDULED] + [JobState.FAILED] * 3
    audit = [r for r in caplog.records if r.name == "recoup.audit"]  # not other threads' lines
    lines = [json.loads(r.getMessage().removeprefix("redrive ")) for r in audit]
    assert [(line["dry_run"], line["matched"], line["redriven"]) for line in lines] == [
        (True, 1, 0),
        (False, 1, 1),
    ]
    assert all(line["who"].startswith("cli:") for line in lines)


def test_the_confirmation_is_asked_and_a_no_redrives_nothing(
    store: Store,
    jobs: list[str],
    db: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, _, err = run(capsys, "jobs", "redrive", *FILTER, "--db", db)
    assert code == 1 and "redrive 2 failed job(s) of default?" in err
    assert err.rstrip().endswith("nothing redriven")
    assert set(states(store, jobs)) == {JobState.FAILED}
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    code, out, _ = run(capsys, "jobs", "redrive", *FILTER, "--db", db)
    assert (code, out.strip()) == (0, "2 of 2 failed job(s) redriven")
    assert states(store, jobs) == [JobState.SCHEDULED, JobState.SCHEDULED] + [JobState.FAILED] * 2


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (("--group", ""), "--group"),
        (("--since", "yesterday"), "--since"),
        (("--since", "2026-03-02T00:00:00Z", "--until", "2026-03-01T00:00:00Z"), "--until"),
    ],
)
def test_a_bad_filter_is_one_line_naming_the_option(
    db: str, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], option: str
) -> None:
    code, _, err = run(capsys, "jobs", "redrive", *argv, "--dry-run", "--db", db)
    assert code == 2 and err.count("\n") == 1 and option in err, err
