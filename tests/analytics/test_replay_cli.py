"""`recoup replay FAILURES.csv`: summary, planned CSV, nightly comparison, plot, bad rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from recoup.cli import main

FAILURES = (
    "invoice_id,failed_at,timezone,country,decline_code,advice_code,gateway,merchant_id\n"
    "inv_1,2026-06-23T15:00:00Z,America/Chicago,US,insufficient_funds,,stripe,acct_1\n"
    "inv_2,2026-06-23T23:30:00Z,Europe/London,GB,do_not_honor,25,stripe,acct_1\n"
    "inv_3,2026-06-24T02:00:00Z,Pacific/Kiritimati,,lost_card,,stripe,acct_1\n"
    "inv_4,2026-06-24T09:00:00Z,Asia/Kolkata,IN,expired_card,,adyen,acct_2\n"
)


@pytest.fixture
def failures(tmp_path: Path) -> Path:
    path = tmp_path / "failures.csv"
    path.write_text(FAILURES)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_json_summary(capsys: pytest.CaptureFixture[str], failures: Path) -> None:
    code, out, err = run(capsys, "replay", str(failures), "--json")
    assert (code, err) == (0, "")
    summary = json.loads(out)
    for key in ("invoices", "attempts", "no_retry", "await_customer", "peak_per_minute"):
        assert isinstance(summary[key], int)
    assert (summary["invoices"], summary["no_retry"], summary["await_customer"]) == (4, 1, 1)
    assert summary["attempts"] == 4 + 2  # inv_1: four retries; inv_2: capped at two
    assert len(summary["by_utc_hour"]) == len(summary["by_local_hour"]) == 24
    assert sum(summary["by_utc_hour"]) == summary["attempts"]
    assert "nightly" not in summary


def test_the_planned_csv_matches_recoup_plan(
    capsys: pytest.CaptureFixture[str], failures: Path, tmp_path: Path
) -> None:
    out_path = tmp_path / "planned.csv"
    code, _, _ = run(capsys, "replay", str(failures), "--out", str(out_path), "--json")
    assert code == 0
    with out_path.open(newline="") as handle:
        planned = list(csv.DictReader(handle))
    assert list(planned[0]) == ["invoice_id", "attempt", "at", "local", "idempotency_key"]
    code, out, _ = run(
        capsys,
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
        "--json",
    )
    expected = [
        {
            "invoice_id": "inv_1",
            "attempt": str(a["attempt"]),
            "at": a["at"],
            "local": a["local"],
            "idempotency_key": a["idempotency_key"],
        }
        for a in json.loads(out)["attempts"]
    ]
    assert [row for row in planned if row["invoice_id"] == "inv_1"] == expected


def test_compare_nightly_shows_the_midnight_spike(
    capsys: pytest.CaptureFixture[str], failures: Path
) -> None:
    _, out, _ = run(capsys, "replay", str(failures), "--compare", "nightly", "--json")
    summary = json.loads(out)
    nightly = summary["nightly"]
    assert nightly["attempts"] == summary["attempts"]
    assert nightly["by_utc_hour"][0] == summary["attempts"]
    assert summary["by_utc_hour"][0] < summary["attempts"]


def test_plot_writes_a_png(
    capsys: pytest.CaptureFixture[str], failures: Path, tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")  # the `plot` extra
    png = tmp_path / "hours.png"
    code, _, _ = run(capsys, "replay", str(failures), "--compare", "nightly", "--plot", str(png))
    assert code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_readable_summary(capsys: pytest.CaptureFixture[str], failures: Path) -> None:
    code, out, _ = run(capsys, "replay", str(failures), "--compare", "nightly")
    assert code == 0
    assert "invoices 4" in out
    assert "nightly" in out


BAD = (
    "invoice_id,failed_at,timezone\n"
    "inv_1,2026-06-23T15:00:00Z,America/Chicago\n"
    "inv_2,tuesday,America/Chicago\n"
    "inv_3,2026-06-23T15:00:00Z,Atlantis/Capital\n"
)


def test_bad_rows_are_reported_by_line_and_skipped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(BAD)
    code, out, err = run(capsys, "replay", str(path), "--json")
    assert code == 0
    assert json.loads(out)["invoices"] == 1
    assert json.loads(out)["bad_rows"] == 2
    assert "line 3: failed_at 'tuesday'" in err
    assert "line 4: timezone 'Atlantis/Capital'" in err


def test_strict_fails_the_run_on_the_first_bad_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(BAD)
    out_path = tmp_path / "planned.csv"
    code, out, err = run(capsys, "replay", str(path), "--strict", "--out", str(out_path))
    assert code == 2
    assert out == ""
    assert err.startswith(f"error: {path} line 3: failed_at")  # the path typed, not a metavar
    assert err.count("\n") == 1
    assert not out_path.exists()


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--compare", "weekly"], "--compare"),
        (["--policy", "no-such-policy.toml"], "--policy"),
    ],
)
def test_bad_options_are_one_line_naming_the_option(
    capsys: pytest.CaptureFixture[str], failures: Path, argv: list[str], names: str
) -> None:
    code, _, err = run(capsys, "replay", str(failures), *argv)
    assert code == 2
    assert names in err
    assert err.count("\n") == 1


def test_a_missing_file_or_column_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "replay", str(tmp_path / "absent.csv"))
    assert code == 2
    assert str(tmp_path / "absent.csv") in err
    headless = tmp_path / "headless.csv"
    headless.write_text("invoice,when\ninv_1,2026-06-23T15:00:00Z\n")
    code, _, err = run(capsys, "replay", str(headless))
    assert code == 2
    assert "invoice_id" in err


@pytest.mark.parametrize(
    ("option", "name"),
    [
        ("--out", "missing-dir/planned.csv"),  # a directory that does not exist
        ("--plot", "missing-dir/hours.png"),
        ("--plot", "hours.svg"),  # a format `_plot` does not write
        ("--out", "."),  # a directory, not a file
    ],
)
def test_an_unusable_output_path_fails_before_planning(
    capsys: pytest.CaptureFixture[str],
    failures: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    option: str,
    name: str,
) -> None:
    planned: list[object] = []
    monkeypatch.setattr(
        "recoup.analytics.replay.replay_failures", lambda *a, **k: planned.append(a)
    )
    code, out, err = run(capsys, "replay", str(failures), option, str(tmp_path / name))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {option}: ")
    assert err.count("\n") == 1
    assert planned == []  # nothing was planned before the refusal


def test_the_progress_bar_never_writes_to_stdout(
    capsys: pytest.CaptureFixture[str], failures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A terminal on stderr turns the bar on; stdout (piped JSON) must stay clean.
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    code, out, _ = run(capsys, "replay", str(failures), "--json")
    assert code == 0
    assert out.startswith("{")  # not even the bar's closing newline
    json.loads(out)


def test_unknown_decline_codes_are_counted_and_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "unknown.csv"
    path.write_text(
        "invoice_id,failed_at,timezone,decline_code\n"
        "inv_1,2026-06-23T15:00:00Z,UTC,zz_mystery\n"
        "inv_2,2026-06-23T15:00:00Z,UTC,zz_mystery\n"
        "inv_3,2026-06-23T15:00:00Z,UTC,qq_other\n"
        "inv_4,2026-06-23T15:00:00Z,UTC,insufficient_funds\n"
    )
    code, out, _ = run(capsys, "replay", str(path), "--json")
    assert code == 0
    assert json.loads(out)["unknown_codes"] == {"zz_mystery": 2, "qq_other": 1}
    code, out, _ = run(capsys, "replay", str(path))
    assert code == 0
    assert "unknown decline codes" in out
    assert "zz_mystery ×2" in out


def test_rows_outside_the_accepted_years_are_bad_rows_by_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "extreme.csv"
    path.write_text(
        "invoice_id,failed_at,timezone\n"
        "inv_1,2026-06-23T15:00:00Z,UTC\n"
        "inv_2,9999-12-31T23:59:59Z,Pacific/Kiritimati\n"
        "inv_3,0001-01-01T00:00:00+14:00,UTC\n"
        "inv_4,0001-01-01T00:00:00Z,UTC\n"
    )
    code, out, err = run(capsys, "replay", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["bad_rows"] == 3
    for line in (3, 4, 5):
        assert f"line {line}: failed_at" in err
    assert "Traceback" not in err


def test_a_skipped_row_with_an_unknown_country_does_not_stop_the_others(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    failures = tmp_path / "f.csv"
    failures.write_text(
        "invoice_id,failed_at,timezone,country\n"
        "inv_1,2026-06-23T15:00:00Z,America/Chicago,US\n"
        "inv_2,2026-06-23T15:00:00Z,America/Chicago,XX\n"
    )
    code, out, err = run(capsys, "replay", str(failures), "--json")
    assert code == 0, err
    assert json.loads(out)["invoices"] == 1
    assert "line 3: country 'XX'" in err
