"""`recoup report`, `recoup merchants …` and the experiment options of `recoup tenants
configure`, on both backends: what they print, what they store, and their errors (one line
naming the option, exit 2, nothing stored)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from recoup.dunning.invoice import InvoiceState
from recoup.recovery.figures import money_by_currency
from tests.api.test_recovery_report_api import (
    EVENING,
    NOW,
    finished,
    small_merchant_with_a_spike,
)
from tests.cli.test_cli import run
from tests.storage.conftest import Backend, Store

DAY = timedelta(days=1)
AS_OF = ["--now", NOW.isoformat()]


def default_invoices(store: Store) -> None:
    """The spiking merchant of the API tests, under the embedded tenant."""
    small_merchant_with_a_spike(store)
    for invoice in store.report_invoices("acme", since=NOW - 200 * DAY, until=NOW):
        store.create_invoice(replace(invoice, tenant="default"), [])


# recoup report


def test_report_prints_the_tables_as_of_now(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    default_invoices(store)
    code, out, err = run(capsys, "report", *backend.db_args(), *AS_OF)
    assert code == 0, err
    assert "Recovery report of default" in out and "2026-02-01 00:00" in out  # 150 days back
    assert "m-small" in out and "do_not_honor" in out


def test_report_json_is_the_apis_document(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    default_invoices(store)
    store.create_invoice(
        finished(
            "won",
            NOW - DAY,
            "insufficient_funds",
            tenant="default",
            state=InvoiceState.RECOVERED,
            recovered_by="attempt:1",
        ),
        [],
    )
    args = [*backend.db_args(), *AS_OF, "--json"]
    code, out, err = run(capsys, "report", *args, "--min-volume", "5")
    assert code == 0, err
    report = json.loads(out)
    assert report["schema"].startswith("recoup.recovery-report/")
    assert report["invoices"] == 97 and report["overall"]["recovered"] == 1
    assert report["options"]["min_volume"] == 5
    assert [i["merchant_id"] for i in report["review_queue"]] == ["m-small"]
    span = {key: datetime.fromisoformat(report[key]) for key in ("since", "until")}
    assert report["amounts"] == money_by_currency(store.dunning_amounts("default", **span))
    assert sum(kinds["recovered"] for kinds in report["amounts"].values()) > 0  # "won"
    since = (NOW - 10 * DAY).isoformat()
    code, out, _ = run(capsys, "report", *args, "--since", since, "--until", NOW.isoformat())
    narrow = json.loads(out)
    assert narrow["since"] == since and 0 < narrow["invoices"] < 10


def test_report_html_writes_one_page_and_prints_its_path(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    default_invoices(store)
    page = tmp_path / "report.html"
    code, out, err = run(capsys, "report", *backend.db_args(), *AS_OF, "--html", str(page))
    assert code == 0, err
    assert out.strip() == str(page)
    text = page.read_text("utf-8")
    assert "<svg" in text and "m-small" in text


def test_report_attempts_writes_the_attempt_log_as_csv(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import csv

    from recoup.dunning.invoice import AttemptRecord, AttemptState

    failed_at = NOW - 3 * DAY
    tried = tuple(
        AttemptRecord(
            attempt=n,
            at=failed_at + n * DAY,
            state=AttemptState.FAILED if n == 1 else AttemptState.SUCCEEDED,
            job_id=f"job-{n}",
            decline_code="insufficient_funds" if n == 1 else None,
        )
        for n in (1, 2)
    )
    store.create_invoice(
        finished(
            "tried",
            failed_at,
            "insufficient_funds",
            tenant="default",
            timezone="America/New_York",
            attempts=tried,
            state=InvoiceState.RECOVERED,
            recovered_by="attempt:2",
        ),
        [],
    )
    invoices = store.report_invoices("default", since=NOW - 200 * DAY, until=NOW)
    path = tmp_path / "attempts.csv"
    code, out, err = run(capsys, "report", *backend.db_args(), *AS_OF, "--attempts", str(path))
    assert code == 0, err
    assert out.strip() == str(path)
    rows = list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))
    assert len(rows) == sum(len(i.attempts) for i in invoices) > 0
    first = next(i for i in invoices if i.invoice_id == "tried")
    mine = [r for r in rows if r["invoice_id"] == first.invoice_id]
    assert [int(r["attempt"]) for r in mine] == [a.attempt for a in first.attempts]
    assert {r["merchant_id"] for r in mine} == {first.merchant_id or ""}
    # NOW is midnight UTC in July: 20:00 EDT the evening before in New York.
    assert [(r["outcome"], r["local_hour"]) for r in mine] == [
        ("failed", "20"),
        ("succeeded", "20"),
    ]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--since", "yesterday"], "--since"),
        (["--until", "2026-06-01T00:00:00"], "--until"),  # no offset
        (["--since", "2026-06-10T00:00:00Z", "--until", "2026-06-01T00:00:00Z"], "until"),
        (["--now", "2026-13-01T00:00:00Z"], "--now"),
        (["--min-volume", "0"], "--min-volume"),
        (["--html", "/nonexistent-dir/report.html"], "--html"),
        (["--attempts", "/nonexistent-dir/attempts.csv"], "--attempts"),
    ],
)
def test_report_refuses_bad_input_in_one_line(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], args: list[str], named: str
) -> None:
    code, out, err = run(capsys, "report", *backend.db_args(), *args)
    assert code == 2, (out, err)
    assert named in err and err.count("\n") == 1 and out == ""


def test_report_of_an_unknown_tenant_is_not_found(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "report", *backend.db_args(), "--tenant", "nobody")
    assert code == 2 and "nobody" in err and err.count("\n") == 1


# recoup merchants


def test_merchants_tag_review_and_untag(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    default_invoices(store)
    db = backend.db_args()
    code, out, err = run(capsys, "merchants", "review", "default", *db, *AS_OF, "--json")
    assert code == 0, err
    assert [i["merchant_id"] for i in json.loads(out)["review_queue"]] == ["m-small"]

    code, out, err = run(
        capsys,
        "merchants",
        "tag",
        "default",
        "m-small",
        "--tag",
        "seasonal",
        "--note",
        "ski season is over",
        *db,
        "--json",
    )
    assert code == 0, err
    shown = json.loads(out)
    assert (shown["tag"], shown["note"]) == ("seasonal", "ski season is over")
    [stored] = store.merchant_tags("default")
    assert (stored.merchant_id, stored.tag) == ("m-small", "seasonal")

    # Judged as of NOW, before the tag was made (by the system clock): not yet in force.
    code, out, err = run(capsys, "merchants", "review", "default", *db, *AS_OF, "--json")
    review = json.loads(out)
    assert [i["merchant_id"] for i in review["review_queue"]] == ["m-small"]
    assert [t["merchant_id"] for t in review["tags"]] == ["m-small"]

    code, out, err = run(capsys, "merchants", "review", "default", *db, *AS_OF)
    assert code == 0 and "m-small" in out and "Review queue" in out

    code, out, err = run(capsys, "merchants", "untag", "default", "m-small", *db)
    assert code == 0 and "untagged m-small" in out
    code, out, err = run(capsys, "merchants", "untag", "default", "m-small", *db, "--json")
    assert json.loads(out) == {"merchant_id": "m-small", "removed": False}
    assert store.merchant_tags("default") == []


def test_a_tag_in_force_moves_the_merchant_out_of_the_queue(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    # The spike of the API tests, shifted to end now (tags are dated by the system clock).
    now = datetime.now(UTC).replace(microsecond=0)
    shift = now - NOW
    small_merchant_with_a_spike(store)
    for invoice in store.report_invoices("acme", since=NOW - 200 * DAY, until=NOW):
        moved = replace(invoice, tenant="default", failed_at=invoice.failed_at + shift)
        store.create_invoice(moved, [])
    db = backend.db_args()
    run(capsys, "merchants", "tag", "default", "m-small", "--tag", "new", *db)
    code, out, err = run(capsys, "merchants", "review", "default", *db, "--json")
    assert code == 0, err
    review = json.loads(out)
    assert review["review_queue"] == []
    assert [i["merchant_id"] for i in review["suppressed"]] == ["m-small"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["tag", "default", "m-1", "--tag", "vip"], "--tag"),
        (["tag", "default", "m-1"], "--tag"),
        (["tag", "default", "m" * 101, "--tag", "new"], "MERCHANT_ID"),
        (["tag", "default", "m-1", "--tag", "new", "--note", "n" * 1001], "--note"),
        (["review", "default", "--min-volume", "0"], "--min-volume"),
    ],
)
def test_merchants_refuse_bad_input_in_one_line_and_store_nothing(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], args: list[str], named: str
) -> None:
    code, out, err = run(capsys, "merchants", *args, *backend.db_args())
    assert code == 2, (out, err)
    assert named in err and err.count("\n") == 1 and out == ""
    assert store.merchant_tags("default") == []


def test_merchants_of_an_unknown_tenant_is_not_found(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        capsys, "merchants", "tag", "nobody", "m-1", "--tag", "new", *backend.db_args()
    )
    assert code == 2 and "nobody" in err


# recoup tenants configure: the experiment


def test_configure_sets_keeps_and_ends_an_experiment(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    arm_b = tmp_path / "evening.toml"
    arm_b.write_text(EVENING)
    db = backend.db_args()
    code, out, err = run(
        capsys,
        "tenants",
        "configure",
        "default",
        "--experiment-policy",
        str(arm_b),
        "--experiment-share",
        "0.5",
        "--experiment-name",
        "evening-test",
        *db,
        "--json",
    )
    assert code == 0, err
    shown = json.loads(out)
    assert shown["experiment_name"] == "evening-test" and shown["experiment_share"] == 0.5
    settings = store.get_settings("default")
    assert settings is not None and settings.experiment_policy_toml == EVENING

    # A setting left out is kept.
    code, out, err = run(
        capsys, "tenants", "configure", "default", "--experiment-share", "0.2", *db
    )
    assert code == 0, err
    assert "evening-test: 20% of new invoices" in out
    settings = store.get_settings("default")
    assert settings is not None
    assert (settings.experiment_name, settings.experiment_share) == ("evening-test", 0.2)
    assert settings.experiment_policy_toml == EVENING

    code, out, err = run(capsys, "tenants", "configure", "default", "--no-experiment", *db)
    assert code == 0, err
    settings = store.get_settings("default")
    assert settings is not None and not settings.has_experiment


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--experiment-share", "0.5"], "--experiment-name"),  # no experiment to keep
        (
            [
                "--experiment-share",
                "1.5",
                "--experiment-name",
                "x",
                "--experiment-policy",
                "calendar",
            ],
            "--experiment-share",
        ),
        (["--experiment-share", "half"], "--experiment-share"),
        (["--experiment-policy", "no/such.toml"], "--experiment-policy"),
        (
            # Arm b named like arm a (the business-days preset).
            [
                "--experiment-policy",
                "business-days",
                "--experiment-share",
                "0.5",
                "--experiment-name",
                "x",
            ],
            "--experiment-policy: name",
        ),
        (["--no-experiment", "--experiment-share", "0.5"], "--no-experiment"),
    ],
)
def test_configure_refuses_a_bad_experiment_in_one_line_and_stores_nothing(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], args: list[str], named: str
) -> None:
    code, out, err = run(capsys, "tenants", "configure", "default", *args, *backend.db_args())
    assert code == 2, (out, err)
    assert named in err and err.count("\n") == 1 and out == ""
    assert store.get_settings("default") is None


def test_an_arm_b_file_without_a_name_is_told_from_a_nameless_arm_a(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    nameless = EVENING.replace('name = "evening"', "")
    (tmp_path / "a.toml").write_text(nameless)
    (tmp_path / "b.toml").write_text(nameless + "# arm b\n")
    code, _, err = run(
        capsys,
        "tenants",
        "configure",
        "default",
        "--policy",
        str(tmp_path / "a.toml"),
        "--experiment-policy",
        str(tmp_path / "b.toml"),
        "--experiment-share",
        "0.5",
        "--experiment-name",
        "x",
        *backend.db_args(),
    )
    assert code == 0, err
    settings = store.get_settings("default")
    assert settings is not None and settings.experiment_policy_toml == nameless + "# arm b\n"
