"""`recoup invoices cancel`, `recoup customers show|set` and `recoup report` with `--url` and
`--token`, against a real server (one per module and backend): the same output as with
`--db` on the server's database, the change made on the server's store, and the server's
refusals as one line. And the commands that only run here refuse `--url` in words."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recoup.dunning.invoice import InvoiceState
from recoup.jobs.model import JobState
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.recovery.service import Dunning, FailureReport
from recoup.storage import Store
from recoup.timekeeping.clock import SystemClock
from tests.cli.remote_server import Served, Tenant, served
from tests.cli.test_cli import run
from tests.cli.test_cli_remote_jobs import both, refused, remote_json

__all__ = ["served"]


def dunning_of(store: Store) -> Dunning:
    scheduler = Scheduler(store, clock=SystemClock(), ssrf=SsrfGuard(allow_private=True))
    return Dunning(scheduler, store)


def dunning(served: Served) -> Dunning:
    return dunning_of(served.store)


def opened(served: Served, tenant: Tenant, invoice_id: str = "in_1") -> None:
    open_invoice(served.store, tenant.name, invoice_id)


def open_invoice(store: Store, tenant: str, invoice_id: str) -> None:
    """A failure of $19.99 just now, in Paris: an invoice retrying, its attempts scheduled."""
    dunning_of(store).report_failure(
        tenant,
        FailureReport(
            invoice_id=invoice_id,
            customer_id="cus_1",
            amount=1999,
            currency="usd",
            failed_at=datetime.now(UTC),
            timezone="Europe/Paris",
            country="FR",
            decline_code="insufficient_funds",
            charge_url="http://127.0.0.1:9/charge",
        ),
    )


def test_invoices_cancel_stops_dunning_on_the_server(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    opened(served, tenant)
    before = dunning(served).get(tenant.name, "in_1")
    shown = remote_json(capsys, tenant, "invoices", "cancel", "in_1", "--reason", "refunded")
    assert (shown["invoice_id"], shown["state"], shown["reason"]) == (
        "in_1",
        "cancelled",
        "dunning stopped: refunded",
    )
    assert shown["cancelled_attempts"] == [a.attempt for a in before.attempts]
    after = dunning(served).get(tenant.name, "in_1")
    assert after.state is InvoiceState.CANCELLED
    for attempt in after.attempts:
        job = served.store.get(tenant.name, attempt.job_id)
        assert job is not None and job.state is JobState.CANCELLED
    # Stopped already: left as it is, in the same words both ways.
    local, remote = both(capsys, tenant, "invoices", "cancel", "in_1", "--reason", "again")
    assert local == remote == "invoice in_1 is cancelled: left as it is\n"


def test_invoices_cancel_of_an_unknown_invoice_is_the_servers_404(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    err = refused(capsys, tenant, "invoices", "cancel", "in_nope", "--reason", "r")
    assert err == "error: no invoice 'in_nope' in dunning\n"


def test_customers_set_and_show_through_the_server_print_as_locally(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    shown = remote_json(
        capsys, tenant, "customers", "set", "cus_1", "--email", "Ada@Example.COM",
        "--locale", "de-DE",
    )  # fmt: skip
    assert (shown["email"], shown["locale"], shown["access"]) == (
        "Ada@example.com",
        "de_DE",
        "active",
    )
    code, out, err = run(capsys, "customers", "set", "cus_1", "--name", "Ada", *tenant.remote)
    assert code == 0 and "name: Ada" in out and "email: Ada@example.com" in out, err
    for argv in (["customers", "show", "cus_1"], ["customers", "show", "cus_1", "--json"]):
        local, remote = both(capsys, tenant, *argv)
        assert local == remote, argv


def test_customers_bad_input_and_an_unknown_customer_are_the_servers_4xx(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    assert "email" in refused(capsys, tenant, "customers", "set", "cus_1", "--email", "ada")
    assert "cus_nope" in refused(capsys, tenant, "customers", "show", "cus_nope")


def test_report_json_through_the_server_is_the_databases_report(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    for n in (1, 2):
        opened(served, tenant, f"in_{n}")
    window = ["--since", "2020-01-01T00:00:00Z", "--until", "2100-01-01T00:00:00Z"]
    local, remote = (json.loads(out) for out in both(capsys, tenant, "report", *window, "--json"))
    assert remote["invoices"] == 2 and remote["running"] == 2
    # The same figures; only the instant each was built at differs.
    for document in (local, remote):
        document["options"].pop("now")
    assert local == remote


def as_of_now(printed: str) -> str:
    today = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:[\d.]+\+00:00)?"
    return re.sub(today, "NOW", " ".join(printed.split()).replace("2100-01-01 00:00", "END"))


def test_report_tables_through_the_server_are_the_databases(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = served.tenant()
    opened(served, tenant)
    window = ["--since", "2020-01-01T00:00:00Z", "--until", "2100-01-01T00:00:00Z"]
    local, remote = both(capsys, tenant, "report", *window)
    assert remote.startswith(f"Recovery report of {tenant.name}: failures in [2020-01-01 00:00")
    # Each is as of the instant it was built (the server's a moment later): the rest is equal.
    assert as_of_now(local) == as_of_now(remote)
    assert "still running (left out)" in remote


def test_report_html_through_the_server_writes_its_page(
    served: Served, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tenant = served.tenant()
    opened(served, tenant)
    page = tmp_path / "report.html"
    code, out, err = run(capsys, "report", "--html", str(page), *tenant.remote)
    assert (code, out) == (0, f"{page}\n"), err
    assert page.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--json", "--now", "2026-01-01T00:00:00Z"], "--now"),
        (["--json", "--attempts", "log.csv"], "--attempts"),
    ],
)
def test_what_the_report_needs_a_database_for_is_refused_with_a_server(
    served: Served, capsys: pytest.CaptureFixture[str], extra: list[str], named: str
) -> None:
    tenant = served.tenant()
    code, out, err = run(capsys, "report", *extra, *tenant.remote)
    assert (code, out) == (2, "") and err.count("\n") == 1 and named in err


@pytest.mark.parametrize(
    "command",
    [["migrate"], ["serve"], ["worker"], ["demo"], ["secrets", "new-key"], ["secrets", "rotate"]],
)
def test_the_commands_that_run_here_refuse_a_url_in_one_line(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    code, out, err = run(capsys, *command, "--url", "http://127.0.0.1:8080")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert f"`recoup {' '.join(command)}` runs here" in err and "--url" in err
