"""`recoup tenants configure` and `recoup serve --clock`: the dunning settings from the command
line, and their errors (one line naming the option, exit 2, nothing stored)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recoup.cli import main
from recoup.jobs.scheduler import Scheduler
from recoup.recovery.service import Dunning
from tests.cli.test_cli import run
from tests.storage.conftest import Backend, Store


def test_configure_stores_the_policy_and_urls_and_keeps_what_is_omitted(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(
        capsys,
        "tenants",
        "configure",
        "default",
        "--policy",
        "calendar",
        "--event-url",
        "http://127.0.0.1:9/events",
        "--allow-private-targets",
        *backend.db_args(),
        "--json",
    )
    assert code == 0, err
    shown = json.loads(out)
    assert shown["event_url"] == "http://127.0.0.1:9/events" and "gaps" in shown["policy"]
    policy = tmp_path / "mine.toml"
    text = Path(shown_policy_path()).read_text() + "# our own copy\n"
    policy.write_text(text)
    code, out, err = run(
        capsys,
        "tenants",
        "configure",
        "default",
        "--policy",
        str(policy),
        *backend.db_args(),
        "--json",
    )
    assert code == 0, err
    settings = Dunning(Scheduler(store), store).settings("default")
    assert settings.policy_toml == text
    assert settings.event_url == "http://127.0.0.1:9/events"  # kept


def shown_policy_path() -> str:
    from importlib import resources

    return str(resources.files("recoup.dunning").joinpath("data/policies/calendar.toml"))


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--policy", "no/such/file.toml"], "--policy"),
        (["--event-url", "http://127.0.0.1:9/events"], "event_url"),  # private, not allowed
        (["--charge-url", "ftp://example.com/x"], "charge_url"),
    ],
)
def test_configure_refuses_bad_input_in_one_line_and_stores_nothing(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], args: list[str], named: str
) -> None:
    code, out, err = run(capsys, "tenants", "configure", "default", *args, *backend.db_args())
    assert code == 2 and named in err and err.count("\n") == 1 and out == ""
    assert store.get_settings("default") is None


def test_configure_a_policy_that_does_not_validate_names_its_field(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("gaps = 'soon'\n")
    code, _, err = run(
        capsys, "tenants", "configure", "default", "--policy", str(bad), *backend.db_args()
    )
    assert code == 2 and "gaps" in err


def test_configure_an_unknown_tenant_is_not_found(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "tenants", "configure", "nobody", *backend.db_args())
    assert code == 2 and "nobody" in err


@pytest.mark.parametrize(
    "spec", ["real", "virtual:", "virtual:tomorrow", "virtual:2026-12-01T00:00"]
)
def test_serve_refuses_a_clock_it_cannot_run_on(
    capsys: pytest.CaptureFixture[str], spec: str, tmp_path: Path
) -> None:
    code = main(["serve", "--clock", spec, "--db", f"sqlite:///{tmp_path}/x.db"])
    err = capsys.readouterr().err
    assert code == 2 and "--clock" in err and err.count("\n") == 1
