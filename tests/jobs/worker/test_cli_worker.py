"""`recoup worker` argument handling (the process behaviour is in test_worker_process.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from recoup.cli import main
from recoup.cli.worker import load_handlers
from recoup.errors import InvalidInput
from recoup.jobs.handlers import HandlerRegistry

registry = HandlerRegistry()  # loaded by name in the test below


def test_an_unknown_database_url_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "--db", "mysql://nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --db") and err.count("\n") == 1


def test_a_bad_cidr_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "--db", "sqlite://:memory:", "--allow-cidr", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --allow-cidr: 'nonsense'")  # the option typed, not the kwarg


def test_handlers_are_loaded_from_module_and_attribute() -> None:
    assert load_handlers(f"{__name__}:registry") is registry
    for spec in ("no-colon", "no.such.module:x", f"{__name__}:pytest"):
        with pytest.raises(InvalidInput):
            load_handlers(spec)


def test_handlers_import_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A console script's sys.path starts with its own directory, not the project's.
    (tmp_path / "billing_jobs_for_test.py").write_text(
        "from recoup.jobs.handlers import HandlerRegistry\nregistry = HandlerRegistry()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    found = load_handlers("billing_jobs_for_test:registry")
    assert isinstance(found, HandlerRegistry)
    sys.modules.pop("billing_jobs_for_test", None)
