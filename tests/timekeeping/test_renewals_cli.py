import json

import pytest

from recoup.cli import main

BASE = ["renewals", "--anchor", "2026-01-31T09:00", "--timezone", "America/New_York"]


def test_it_prints_the_renewals_as_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    # The contract: n = 1..count, `at` in UTC with Z, `local` with its offset; Feb 28,
    # Mar 31, Apr 30, May 31 at 09:00 local (EST, then EDT from March 8).
    assert main([*BASE, "--count", "4", "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == {
        "anchor": {
            "local": "2026-01-31T09:00:00",
            "timezone": "America/New_York",
            "every": "month",
            "interval": 1,
            "end_of_month": "clamp",
        },
        "occurrences": [
            {"n": 1, "at": "2026-02-28T14:00:00Z", "local": "2026-02-28T09:00:00-05:00"},
            {"n": 2, "at": "2026-03-31T13:00:00Z", "local": "2026-03-31T09:00:00-04:00"},
            {"n": 3, "at": "2026-04-30T13:00:00Z", "local": "2026-04-30T09:00:00-04:00"},
            {"n": 4, "at": "2026-05-31T13:00:00Z", "local": "2026-05-31T09:00:00-04:00"},
        ],
    }


def test_it_prints_twelve_renewals_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    # --count defaults to 12; the anchor (n = 0) is not printed.
    assert main([*BASE, "--json"]) == 0
    occurrences = json.loads(capsys.readouterr().out)["occurrences"]
    assert [o["n"] for o in occurrences] == list(range(1, 13))
    assert occurrences[-1]["local"] == "2027-01-31T09:00:00-05:00"


def test_it_passes_every_interval_and_rule_through(capsys: pytest.CaptureFixture[str]) -> None:
    # Every 2 months rolling forward: Feb "31" is skipped by the step, Mar 31, May 31, Jul 31.
    args = [*BASE, "--every", "month", "--interval", "2", "--end-of-month", "roll-forward"]
    assert main([*args, "--count", "3", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["anchor"]["interval"] == 2
    assert printed["anchor"]["end_of_month"] == "roll-forward"
    assert [o["local"][:10] for o in printed["occurrences"]] == [
        "2026-03-31",
        "2026-05-31",
        "2026-07-31",
    ]


def test_restrict_renews_on_the_anchor_day_every_month(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["renewals", "--anchor", "2026-01-28T09:00", "--timezone", "UTC"]
    assert main([*args, "--end-of-month", "restrict", "--count", "3", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["anchor"]["end_of_month"] == "restrict"
    assert [o["local"][:10] for o in printed["occurrences"]] == [
        "2026-02-28",
        "2026-03-28",
        "2026-04-28",
    ]


def test_the_help_lists_every_month_end_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["renewals", "--help"]) == 0
    # Rich wraps the help in a box: drop its borders and line breaks before reading.
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "clamp, roll-forward, last-day, restrict" in out


def test_it_prints_a_readable_table(capsys: pytest.CaptureFixture[str]) -> None:
    # Without --json: one row per renewal with its local time and UTC instant.
    assert main([*BASE, "--count", "4"]) == 0
    out = capsys.readouterr().out
    for local, at in [
        ("2026-02-28 09:00 -0500", "2026-02-28T14:00:00Z"),
        ("2026-03-31 09:00 -0400", "2026-03-31T13:00:00Z"),
        ("2026-04-30 09:00 -0400", "2026-04-30T13:00:00Z"),
        ("2026-05-31 09:00 -0400", "2026-05-31T13:00:00Z"),
    ]:
        assert local in out and at in out
    assert "2026-06-30" not in out


def test_the_table_notes_a_time_moved_out_of_a_gap(capsys: pytest.CaptureFixture[str]) -> None:
    # A 02:30 anchor renewing on 2026-03-08 runs at 03:30 EDT and says why.
    args = ["renewals", "--anchor", "2026-02-08T02:30", "--timezone", "America/New_York"]
    assert main([*args, "--count", "1"]) == 0
    out = capsys.readouterr().out
    assert "2026-03-08 03:30 -0400" in out
    assert "02:30 does not exist" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # Not a date at all, and a date that does not exist.
        (["--anchor", "soon"], "error: --anchor: 'soon' is not valid"),
        (["--anchor", "2026-02-30T09:00"], "error: --anchor: '2026-02-30T09:00' is not valid"),
        # An offset would contradict --timezone.
        (["--anchor", "2026-01-31T09:00+01:00"], "error: --anchor: '2026-01-31T09:00+01:00'"),
        (["--timezone", "Mars/Olympus_Mons"], "error: --timezone: 'Mars/Olympus_Mons' is not"),
        (["--interval", "0"], "error: --interval: 0 is not valid; expected an integer ≥ 1"),
        # Typer's own parse error still names the option.
        (["--interval", "two"], "error: Invalid value for '--interval'"),
        (["--every", "fortnight"], "error: --every: 'fortnight' is not valid; expected one of"),
        (["--end-of-month", "nearest"], "error: --end-of-month: 'nearest' is not valid"),
        # restrict refuses BASE's 31st anchor, naming the anchor and what it would accept.
        (
            ["--end-of-month", "restrict"],
            "error: --anchor: '2026-01-31T09:00' is not valid; expected a day of month from 1 "
            "to 28 under the restrict month-end rule",
        ),
        (["--count", "0"], "error: --count: 0 is not valid"),
    ],
)
def test_invalid_input_exits_2_with_one_line_naming_the_option(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Later options override BASE's, so each case changes exactly one input.
    assert main([*BASE, *args, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(message)
    assert "Traceback" not in captured.err


def test_a_missing_option_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # --timezone is required: there is no machine default zone in Recoup.
    assert main(["renewals", "--anchor", "2026-01-31T09:00"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["error: Missing option '--timezone'."]
