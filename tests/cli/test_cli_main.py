"""The CLI's error convention, whatever the command: one line, exit 2, no traceback."""

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
