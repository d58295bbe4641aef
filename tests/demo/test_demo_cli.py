"""`recoup demo` end to end at a small size: the real path (jobs, the worker, signed requests to
the example billing app in its own process, the simulated gateway with faults), zero double
charges, a recovered share in a sane band, the same figures for the same seed, the nightly
batch beside it, and a failing exit when money moves twice."""

from __future__ import annotations

import contextlib
import functools
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from recoup.cli import main
from recoup.demo import run as demo_run
from recoup.demo.run import AfterRun, DemoOptions, run_demo
from recoup.demo.summary import demo_json
from recoup.dunning.policy import resolve_policy_text
from recoup.payments import ChargeRequest

pytestmark = pytest.mark.slow

SIZE, SEED = 200, 11
TOP_KEYS = {
    "seed",
    "size",
    "policy",
    "clock",
    "jobs_run",
    "customer_events",
    "double_charges",
    "emails",
    "report",
    "nightly_comparison",
    "files",
    "dashboard",
    "elapsed_seconds",
}
VARYING = ("files", "dashboard", "elapsed_seconds")  # where the run's files are, its token, time


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["demo", *argv])
    return code, out.getvalue()


def test_a_month_is_recovered_with_no_double_charge_beside_the_nightly_batch(
    tmp_path: Path,
) -> None:
    db = tmp_path / "recoup.db"
    code, out = run_cli("--size", str(SIZE), "--seed", str(SEED), "--db", str(db), "--json")
    assert code == 0, out
    demo = json.loads(out)
    assert set(demo) == TOP_KEYS
    assert (demo["seed"], demo["size"], demo["policy"]) == (SEED, SIZE, "business-days")

    doubles = demo["double_charges"]
    assert doubles["total"] == 0 and doubles["invoices"] == []
    assert doubles["successful_charges_at_gateway"] > 0
    report = demo["report"]
    assert report["double_charges"] == 0
    assert report["invoices"] == SIZE and report["running"] == 0  # every campaign ended
    assert demo["customer_events"]["renewal failed"] == SIZE

    comparison = demo["nightly_comparison"]
    recoup, nightly = comparison["recoup"], comparison["nightly_batch"]
    assert 0.3 <= recoup["recovery_rate"] <= 0.65, recoup
    assert recoup["invoices"] == nightly["invoices"] == SIZE
    assert "in-process" in comparison["note"]
    # The old batch tries hard declines; Recoup never does. It lands every night's attempts
    # in one minute; Recoup spreads them over the customers' mornings.
    assert recoup["attempts_on_hard_declines"] == 0 < nightly["attempts_on_hard_declines"]
    assert nightly["peak_per_minute"] > recoup["peak_per_minute"]
    assert nightly["peak_minute"].endswith("T00:00Z")

    files = demo["files"]
    assert files["db"] == f"sqlite:///{db}"
    assert Path(files["billing_db"]).is_file()
    html = Path(files["html_report"]).read_text("utf-8")
    assert html.lstrip().lower().startswith("<!doctype html") and "<svg" in html
    assert demo["dashboard"]["command"] == f"recoup serve --db sqlite:///{db} --port 8000"
    assert demo["dashboard"]["url"] == "http://127.0.0.1:8000/"
    assert demo["dashboard"]["token"].startswith("rcp_")


def test_the_same_seed_gives_the_same_figures_however_many_attempts_a_batch_runs(
    tmp_path: Path,
) -> None:
    """The nightly comparison is honest only if Recoup's figures are the world's and the
    seed's: a test clock batch of one attempt at a time gives what the default batch does."""
    text, _ = resolve_policy_text("calendar", lambda path: Path(path).read_text("utf-8"))
    runs = []
    for name, concurrency in (("first.db", 1), ("second.db", DemoOptions.concurrency)):
        options = DemoOptions(
            size=60,
            seed=5,
            policy_name="calendar",
            policy_toml=text,
            db_path=tmp_path / name,
            concurrency=concurrency,
        )
        runs.append(run_demo(options))
    assert runs[1].options.concurrency > 1
    figures = [json.loads(json.dumps(demo_json(run, "report.html"))) for run in runs]
    for found in figures:
        for key in VARYING:
            del found[key]
    assert figures[0] == figures[1]
    assert figures[0]["report"]["invoices"] == 60
    # The terminal pages: the report, the audit, the comparison, the way on.
    from recoup.cli.demo import _print

    console = Console(record=True, width=120)
    _print(runs[0], "report.html", console)
    shown = console.export_text()
    for expected in ("Double charges: 0", "nightly batch", "HTML report:", "recoup serve --db"):
        assert expected in shown


def test_the_command_and_the_options_default_to_the_same_size() -> None:
    from recoup.cli.demo import DEFAULT_SIZE

    assert DemoOptions.size == DEFAULT_SIZE


def test_money_moved_twice_fails_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def charge_twice(after: AfterRun) -> None:
        # A bug that charges one invoice again under keys of its own, past every retry.
        c = after.customers[0]
        for key in ("bug:1", "bug:2"):
            after.gateway.charge(
                ChargeRequest(
                    idempotency_key=key,
                    invoice_id=c.invoice_id,
                    customer_id=c.customer_id,
                    amount=c.amount,
                    currency=c.currency,
                    at=c.failed_at,  # no card: the gateway charges it
                )
            )

    monkeypatch.setattr(
        demo_run, "run_demo", functools.partial(demo_run.run_demo, after_run=charge_twice)
    )
    code = main(["demo", "--size", "30", "--seed", "3", "--db", str(tmp_path / "r.db"), "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert json.loads(out)["double_charges"]["total"] == 1
    assert "money moved twice" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--size", "0"], "--size"),
        (["--db", "postgresql://localhost/x"], "--db"),
        (["--policy", "no-such-policy"], "--policy"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", *argv]) == 2
    _, err = capsys.readouterr()
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_an_existing_database_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "recoup.db"
    taken.write_text("mine")
    assert main(["demo", "--db", str(taken)]) == 2
    _, err = capsys.readouterr()
    assert "--db" in err and "fresh" in err
    assert taken.read_text() == "mine"


@pytest.mark.parametrize("left", ["recoup-billing.db", "recoup-billing-app.log", "recoup.db-wal"])
def test_a_billing_file_left_from_an_earlier_run_is_refused(
    left: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its ledger would be read as this run's: the figures would silently go wrong."""
    (tmp_path / left).write_text("earlier")
    assert main(["demo", "--db", str(tmp_path / "recoup.db")]) == 2
    _, err = capsys.readouterr()
    assert "--db" in err and left in err and len(err.strip().splitlines()) == 1
    assert (tmp_path / left).read_text() == "earlier"
    assert not (tmp_path / "recoup.db").exists()


def test_a_world_from_a_scenario_file_drives_the_retries(tmp_path: Path) -> None:
    """The same customers in the night-owl world: the renewals and the contract stay, the
    figures move, and the output names the world."""
    scenarios = tmp_path / "world.toml"
    scenarios.write_text('world = "night-owl"\n', encoding="utf-8")
    code, out = run_cli(
        "--size", "80", "--seed", "3", "--db", str(tmp_path / "r.db"), "--scenarios",
        str(scenarios), "--json",
    )  # fmt: skip
    assert code == 0, out
    demo = json.loads(out)
    assert set(demo) == TOP_KEYS | {"world"}
    assert demo["world"] == "night-owl"
    assert demo["double_charges"]["total"] == 0
    assert demo["customer_events"]["renewal failed"] == 80
    assert demo["report"]["invoices"] == 80 and demo["report"]["running"] == 0


def test_a_bad_scenario_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenarios = tmp_path / "world.toml"
    scenarios.write_text("[world.hours]\ndecline_rates = [2]\n", encoding="utf-8")
    assert main(["demo", "--scenarios", str(scenarios)]) == 2
    _, err = capsys.readouterr()
    assert "world.hours.decline_rates" in err and len(err.strip().splitlines()) == 1
