"""The CLI's error convention, whatever the command: one line, exit 2, no traceback."""

import os

import pytest

from recoup.cli import main


def test_no_arguments_prints_the_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    captured = capsys.readouterr()
    assert "Usage: recoup" in captured.out + captured.err
    assert "Traceback" not in captured.err


def test_an_unknown_command_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["refund-everyone"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: ") and "refund-everyone" in err


def test_an_option_of_the_wrong_type_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["renewals", "--anchor", "2026-01-31T09:00", "--timezone", "UTC", "--count", "x"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--count" in err


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    import recoup

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"recoup {recoup.__version__}\n"


def test_help_before_a_command_still_lists_every_command() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "recoup", "--help", "worker"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    for command in ("worker", "serve", "jobs", "demo"):
        assert f" {command} " in done.stdout, command


def _registered_modules() -> dict[str, set[str]]:
    """Each top-level command of the fully loaded CLI → the modules defining its callbacks."""
    import typer

    from recoup.cli import load_commands

    app = load_commands()
    found: dict[str, set[str]] = {}
    for info in app.registered_commands:
        assert info.callback is not None
        name = info.name or typer.main.get_command_name(info.callback.__name__)
        found[name] = {info.callback.__module__}
    for group in app.registered_groups:
        sub = group.typer_instance
        assert group.name is not None and sub is not None
        found[group.name] = {c.callback.__module__ for c in sub.registered_commands if c.callback}
    return found


def test_the_command_map_names_the_modules_that_register_each_command() -> None:
    from recoup.cli import COMMAND_MODULES

    expected = {
        name: {f"recoup.cli.{module}" for module in modules}
        for name, modules in COMMAND_MODULES.items()
    }
    assert _registered_modules() == expected


def test_one_command_loads_only_its_own_modules() -> None:
    import subprocess
    import sys

    probe = (
        "import sys; from recoup.cli import main; main(['migrate', '--help']);"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('recoup.'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(done.stdout.split("\n")[-2].split())
    assert "recoup.cli.migrate" in loaded
    assert not {"recoup.cli.demo", "recoup.cli.jobs", "recoup.cli.serve"} & loaded
    heavy = ("recoup.api", "recoup.jobs.worker")  # the HTTP API; the worker and its client
    assert not [m for m in loaded if m in heavy or m.startswith(tuple(f"{h}." for h in heavy))]
