"""`recoup anchors recover HISTORY.csv`: the report, its JSON contract, and bad input as one
line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from recoup.cli import main
from tests.test_packaging import run_without_extras

# The seed's two cases, as a billing system in New York would export them: instants in UTC,
# charged at 22:00 local, so the UTC date is the next day; read in the customer's zone they
# are Jan 31, Feb 28, Mar 28, Apr 28 (a 31st chained through a clamp) and Mar 31, Apr 30,
# May 30, Jun 30 (a 31st drifting to the 30th after April).
SEED = """customer_id,charged_at,timezone,amount
cus_jan31,2025-02-01T03:00:00Z,America/New_York,19.00
cus_jan31,2025-03-01T03:00:00Z,America/New_York,19.00
cus_jan31,2025-03-29T02:00:00Z,America/New_York,19.00
cus_jan31,2025-04-29T02:00:00Z,America/New_York,19.00
cus_mar31,2025-04-01T02:00:00Z,America/New_York,
cus_mar31,2025-05-01T02:00:00Z,America/New_York,
cus_mar31,2025-05-31T02:00:00Z,America/New_York,
cus_mar31,2025-07-01T02:00:00Z,America/New_York,
"""

OTHERS = """customer_id,charged_at
ok_15th,2026-01-15
ok_15th,2026-02-15
ok_15th,2026-03-15
short,2026-01-15
short,2026-02-15
late_retry,2026-01-15
late_retry,2026-02-15
late_retry,2026-03-18
late_retry,2026-04-15
weekly,2026-01-05
weekly,2026-01-12
weekly,2026-01-19
"""

# Both files in one, OTHERS' rows padded to SEED's four columns.
BOTH = SEED + "".join(f"{row},,\n" for row in OTHERS.splitlines()[1:])


def write(tmp_path: Path, text: str, name: str = "history.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def recover_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["anchors", "recover", *args, "--json"]) == 0
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    return printed


def by_id(printed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["customer_id"]: c for c in printed["customers"]}


def test_the_seed_cases_are_recovered_with_their_drift_and_next_renewal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = recover_json(capsys, str(write(tmp_path, SEED)))
    assert printed["summary"] == {
        "customers": 2,
        "recovered": 2,
        "with_drift": 2,
        "insufficient": 0,
        "ambiguous": 0,
        "inconsistent": 0,
        "unsupported": 0,
    }
    jan31, mar31 = printed["customers"]
    # The whole record of one customer: every key, as the contract spells it.
    assert jan31 == {
        "customer_id": "cus_jan31",
        "status": "recovered",
        "reason": None,
        "charges": 4,
        "first_charge": "2025-01-31",
        "last_charge": "2025-04-28",
        "anchor": {"day": 31, "end_of_month": "clamp", "interval_months": 1, "also_fits": []},
        "drifted": [
            {
                "n": 2,
                "line": 4,
                "charged": "2025-03-28",
                "expected": "2025-03-31",
                "amount": "19.00",
            },
            {
                "n": 3,
                "line": 5,
                "charged": "2025-04-28",
                "expected": "2025-04-30",
                "amount": "19.00",
            },
        ],
        "next_renewal": "2025-05-31",
        "drifting_next": "2025-05-28",
        "extra_days": 3,
    }
    # June 30 is where a 31st falls in June anyway: only May drifted.
    assert [(d["charged"], d["expected"], d["amount"]) for d in mar31["drifted"]] == [
        ("2025-05-30", "2025-05-31", None)
    ]
    assert (mar31["anchor"]["day"], mar31["next_renewal"], mar31["drifting_next"]) == (
        31,
        "2025-07-31",
        "2025-07-30",
    )


def test_histories_that_settle_no_anchor_are_reported_with_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = recover_json(capsys, str(write(tmp_path, OTHERS)))
    found = by_id(printed)
    assert list(found) == sorted(found)  # customers sorted by id
    assert {k: v["status"] for k, v in found.items()} == {
        "late_retry": "inconsistent",
        "ok_15th": "recovered",
        "short": "insufficient",
        "weekly": "unsupported",
    }
    assert "2026-03-18" in found["late_retry"]["reason"]
    assert "2 charges" in found["short"]["reason"]
    for unrecovered in ("late_retry", "short", "weekly"):
        record = found[unrecovered]
        assert record["anchor"] is None and record["next_renewal"] is None
        assert record["drifted"] == []
    ok = found["ok_15th"]
    assert (ok["drifted"], ok["next_renewal"], ok["drifting_next"]) == ([], "2026-04-15", None)
    assert ok["anchor"]["also_fits"] == ["roll-forward", "restrict"]
    assert printed["summary"]["customers"] == 4 and printed["summary"]["with_drift"] == 0


def test_a_given_rule_is_used_for_every_customer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = recover_json(capsys, str(write(tmp_path, BOTH)), "--rule", "restrict")
    found = by_id(printed)
    assert printed["rule"] == "restrict"
    assert found["ok_15th"]["anchor"]["end_of_month"] == "restrict"
    # A 31st cannot be a restrict anchor: reported, not refused.
    assert found["cus_jan31"]["status"] == "inconsistent"
    assert "restrict" in found["cus_jan31"]["reason"]


def test_as_of_moves_the_next_renewal_to_the_first_one_on_or_after_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = recover_json(capsys, str(write(tmp_path, SEED)), "--as-of", "2025-09-02")
    assert printed["as_of"] == "2025-09-02"
    assert [c["next_renewal"] for c in printed["customers"]] == ["2025-09-30", "2025-09-30"]


def test_the_table_shows_each_customer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # wide enough that no cell wraps
    assert main(["anchors", "recover", str(write(tmp_path, BOTH))]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "6 customers: 3 recovered (2 with drifted charges)" in out
    for text in ("cus_jan31", "2025-03-28 → 2025-03-31", "2025-05-31", "insufficient", "weekly"):
        assert text in out


def test_customer_ids_are_printed_as_text_not_markup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = "".join(f"[red]x[/red],2026-0{m}-10\n" for m in (1, 2, 3))
    assert (
        main(["anchors", "recover", str(write(tmp_path, "customer_id,charged_at\n" + rows))]) == 0
    )
    assert "[red]x[/red]" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("customer_id,charged_at\nc1,2025-02-30\n", "line 2: charged_at: '2025-02-30'"),
        ("customer_id,charged_at\nc1,2025-01-31T09:00\nc1,yesterday\n", "line 3: charged_at"),
        ("customer_id,charged_at\nc1,1969-12-31\n", "line 2: charged_at: '1969-12-31'"),
        ("customer_id,charged_at,timezone\nc1,2025-01-31,Mars/Base\n", "line 2: timezone"),
        ("customer_id,charged_at,amount\nc1,2025-01-31,-5\n", "line 2: amount: '-5'"),
        ("customer_id,charged_at,amount\nc1,2025-01-31,lots\n", "line 2: amount"),
        ("customer_id,charged_at\n,2025-01-31\n", "line 2: customer_id"),
        ("customer_id,charged_at\nc1,2025-01-31,extra\n", "line 2: 'c1,2025-01-31,extra'"),
        ("customer,charged_at\nc1,2025-01-31\n", "header: 'customer,charged_at'"),
        ("", "header: ''"),
    ],
)
def test_a_bad_history_exits_2_with_one_line_naming_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = write(tmp_path, text)
    assert main(["anchors", "recover", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"error: {path} {message}"), lines[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--rule", "nearest"],
            "error: --rule: 'nearest' is not valid; expected one of clamp, "
            "roll-forward, last-day, restrict",
        ),
        (
            ["--as-of", "someday"],
            "error: --as-of: 'someday' is not valid; expected a date such as 2026-06-30, "
            "in the years 1970–9000",
        ),
        # Before the last charge: the history is later than "today".
        (
            ["--as-of", "2025-04-01"],
            "error: --as-of: '2025-04-01' is not valid; expected a date "
            "on or after every charge; line 9 charges cus_mar31 on 2025-06-30",
        ),
    ],
)
def test_bad_options_exit_2_with_one_line_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["anchors", "recover", str(write(tmp_path, SEED)), *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [message]


def test_a_missing_or_undecodable_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["anchors", "recover", str(tmp_path / "nope.csv")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'nope.csv'}: ")
    latin = tmp_path / "latin.csv"
    latin.write_bytes("customer_id,charged_at\ncafé,2025-01-31\n".encode("latin-1"))
    assert main(["anchors", "recover", str(latin)]) == 2
    assert "expected a readable UTF-8 CSV file" in capsys.readouterr().err


def test_the_help_documents_the_columns_and_the_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["anchors", "recover", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    for text in (
        "customer_id",
        "charged_at",
        "timezone",
        "amount",
        "clamp, roll-forward, last-day, restrict",
    ):
        assert text in out


def test_it_runs_on_the_core_install_without_any_extra(tmp_path: Path) -> None:
    write(tmp_path, SEED)
    done = run_without_extras(
        """
        import sys
        from recoup.cli import main
        sys.exit(main(["anchors", "recover", "history.csv", "--json"]))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["recovered"] == 2
