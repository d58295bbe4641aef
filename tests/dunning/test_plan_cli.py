"""`recoup plan`: the exact JSON contract, the readable table and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recoup.cli import main

EXAMPLE = [
    "plan",
    "--invoice",
    "inv_1",
    "--failed-at",
    "2026-06-23T15:00:00Z",
    "--timezone",
    "America/Chicago",
    "--country",
    "US",
    "--decline-code",
    "insufficient_funds",
]

# The contract example, pinned: a change here changes every plan ever made (jitter included).
EXPECTED = {
    "invoice": "inv_1",
    "decision": "retry",
    "reason": "decline code insufficient_funds: soft; 4 retries (business-days)",
    "attempts": [
        {
            "attempt": 1,
            "at": "2026-06-24T15:06:36Z",
            "local": "2026-06-24T10:06:36-05:00",
            "idempotency_key": "retry:inv_1:1",
            "name": "dunning-retry-inv_1-1",
        },
        {
            "attempt": 2,
            "at": "2026-06-29T15:09:56Z",
            "local": "2026-06-29T10:09:56-05:00",
            "idempotency_key": "retry:inv_1:2",
            "name": "dunning-retry-inv_1-2",
        },
        {
            "attempt": 3,
            "at": "2026-07-02T15:21:40Z",
            "local": "2026-07-02T10:21:40-05:00",
            "idempotency_key": "retry:inv_1:3",
            "name": "dunning-retry-inv_1-3",
        },
        {
            # Thu 2 Jul + 3 business days skips Fri 3 Jul (Independence Day observed).
            "attempt": 4,
            "at": "2026-07-08T15:54:54Z",
            "local": "2026-07-08T10:54:54-05:00",
            "idempotency_key": "retry:inv_1:4",
            "name": "dunning-retry-inv_1-4",
        },
    ],
    "after_last_failure": "pause_access",
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_json_contract_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *EXAMPLE, "--json")
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert list(document) == ["invoice", "decision", "reason", "attempts", "after_last_failure"]
    assert document == EXPECTED


def test_the_same_input_prints_the_same_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    _, first, _ = run(capsys, *EXAMPLE, "--json")
    _, second, _ = run(capsys, *EXAMPLE, "--json")
    assert first == second
    assert first.endswith("}\n")


@pytest.mark.parametrize(
    ("extra", "decision"),
    [
        (["--decline-code", "lost_card"], "no_retry"),
        (["--decline-code", "expired_card"], "await_customer"),
        (["--advice-code", "do_not_try_again"], "no_retry"),
        (["--advice-code", "24", "--advice-code", "01"], "await_customer"),
    ],
)
def test_the_decision_kinds(
    capsys: pytest.CaptureFixture[str], extra: list[str], decision: str
) -> None:
    argv = [a for a in EXAMPLE if a not in ("--decline-code", "insufficient_funds")]
    code, out, _ = run(capsys, *argv, *extra, "--json")
    assert code == 0
    document = json.loads(out)
    assert document["decision"] == decision
    assert document["attempts"] == []
    assert document["after_last_failure"] == "pause_access"


def test_the_calendar_preset_and_a_policy_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, out, _ = run(capsys, *EXAMPLE, "--policy", "calendar", "--json")
    assert len(json.loads(out)["attempts"]) == 4
    path = tmp_path / "two.toml"
    path.write_text('name = "two"\nfinal_action = "cancel"\ngaps = [{ days = 2 }, { days = 2 }]\n')
    _, out, _ = run(capsys, *EXAMPLE, "--policy", str(path), "--json")
    document = json.loads(out)
    assert len(document["attempts"]) == 2
    assert document["after_last_failure"] == "cancel"


def test_without_json_a_readable_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *EXAMPLE)
    assert code == 0
    assert "inv_1: retry" in out
    assert "2026-06-24T15:06:36Z" in out
    assert "dunning-retry-inv_1-4" in out
    assert "after the last failure: pause_access" in out


@pytest.mark.parametrize(
    ("replace", "value", "names"),
    [
        ("--timezone", "Mars/Olympus_Mons", "--timezone"),
        ("--failed-at", "2026-06-23 15:00", "--failed-at"),
        ("--failed-at", "yesterday", "--failed-at"),
        ("--country", "XX", "--country"),
        ("--invoice", " ", "--invoice"),
    ],
)
def test_bad_input_is_one_line_naming_the_option(
    capsys: pytest.CaptureFixture[str], replace: str, value: str, names: str
) -> None:
    argv = list(EXAMPLE)
    argv[argv.index(replace) + 1] = value
    code, out, err = run(capsys, *argv, "--json")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert names in err


def test_a_missing_or_invalid_policy_file_names_the_option_and_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, *EXAMPLE, "--policy", str(tmp_path / "absent.toml"))
    assert code == 2
    assert err.startswith("error: --policy")
    bad = tmp_path / "bad.toml"
    bad.write_text("gaps = [{ days = 1 }, { fortnights = 1 }]\n")
    code, _, err = run(capsys, *EXAMPLE, "--policy", str(bad))
    assert code == 2
    assert "--policy" in err
    assert "gaps[1].fortnights" in err
    assert err.count("\n") == 1


def test_a_missing_required_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "plan", "--invoice", "inv_1", "--timezone", "UTC")
    assert code == 2
    assert "--failed-at" in err


@pytest.mark.parametrize(
    "failed_at",
    [
        "0001-01-01T00:00:00+14:00",  # before year 1 in UTC: overflowed in the planner
        "9999-12-31T23:59:59-14:00",  # after year 9999 in UTC
        "9999-12-30T00:00:00Z",  # representable, but its retries would not be
    ],
)
def test_an_extreme_failed_at_is_one_line_naming_the_option(
    capsys: pytest.CaptureFixture[str], failed_at: str
) -> None:
    argv = ["plan", "--invoice", "inv_1", "--failed-at", failed_at, "--timezone", "UTC"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --failed-at: ")
    assert "1970–9000" in err
    assert err.count("\n") == 1
