"""The command line of Stripe-native dunning, on both backends: `recoup tenants configure
--charge-with/--stripe-api-key-file` (the key stored sealed, never printed), `recoup invoices
cancel`, `recoup stripe check` against localstripe, and `recoup secrets new-key|rotate`."""

from __future__ import annotations

import io
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recoup.dunning.invoice import InvoiceState
from recoup.jobs.model import JobState
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.recovery.records import FailureReport
from recoup.recovery.service import Dunning
from recoup.recovery.stripe_intake import StripeIntake
from recoup.sealed import SecretBox, new_key
from recoup.timekeeping.clock import SystemClock
from tests import support_stripe
from tests.cli.test_cli import run
from tests.storage.conftest import Backend, Store
from tests.support_stripe import LocalStripe

localstripe = support_stripe.localstripe  # the fixture: one localstripe for the module

KEY = "rk_test_" + "Cl1K3y" * 6
KEY_TAIL = KEY[-8:]
LOCAL_KEY = "sk_test_" + "L0calStr1pe" * 3  # localstripe takes any sk_ key
WEBHOOK_SECRET = "whsec_" + "r0tat3" * 5


def box() -> SecretBox:
    return SecretBox([os.environ["RECOUP_SECRET_KEY"]])


def key_file(tmp_path: Path, key: str = KEY) -> str:
    path = tmp_path / "stripe.key"
    path.write_text(key + "\n", encoding="utf-8")
    return str(path)


def configure(backend: Backend, *args: str) -> tuple[str, ...]:
    return ("tenants", "configure", "default", *backend.db_args(), *args)


def assert_key_stored(store: Store, key: str = KEY) -> str:
    found = store.hosted.get_hosted_charging("default")
    assert found is not None and found.api_key.startswith("sealed:v1:")
    assert key not in found.api_key
    assert box().open(found.api_key) == key
    return found.api_key


# tenants configure --charge-with / --stripe-api-key-file


def test_a_key_file_charges_with_stripe_stored_sealed_and_never_printed(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ("--charge-with", "stripe", "--stripe-api-key-file", key_file(tmp_path))
    code, out, err = run(capsys, *configure(backend, *args, "--json"))
    assert code == 0, err
    shown = json.loads(out)
    assert (shown["charge_with"], shown["stripe_api_key_set"]) == ("stripe", True)
    assert KEY_TAIL not in out + err
    assert_key_stored(store)

    code, out, err = run(capsys, *configure(backend, *args))  # the human lines
    assert code == 0, err
    assert "through Stripe" in out and KEY_TAIL not in out + err


def test_a_dash_reads_the_key_from_stdin(
    backend: Backend,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(KEY + "\n"))
    args = ("--charge-with", "stripe", "--stripe-api-key-file", "-", "--json")
    code, out, err = run(capsys, *configure(backend, *args))
    assert code == 0, err
    assert json.loads(out)["stripe_api_key_set"] is True
    assert KEY_TAIL not in out + err
    assert_key_stored(store)


@pytest.mark.parametrize(
    "bad",
    [
        "pk_test_" + "Cl1K3y" * 6,  # a publishable key
        "sk_test_" + "Cl1K3y" * 6 + "!",
        "sk_prod_" + "Cl1K3y" * 6,
        "whsec_" + "Cl1K3y" * 6,
        "",
    ],
)
def test_a_malformed_key_is_one_line_naming_the_option_not_echoed_and_stores_nothing(
    backend: Backend,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    bad: str,
) -> None:
    args = ("--charge-with", "stripe", "--stripe-api-key-file", key_file(tmp_path, bad))
    code, out, err = run(capsys, *configure(backend, *args))
    assert code == 2 and out == ""
    assert "--stripe-api-key-file" in err and err.count("\n") == 1
    assert "Cl1K3y" not in err
    assert store.hosted.get_hosted_charging("default") is None
    assert store.get_settings("default") is None


def test_charge_with_url_removes_the_key(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ("--charge-with", "stripe", "--stripe-api-key-file", key_file(tmp_path))
    assert run(capsys, *configure(backend, *args))[0] == 0

    code, out, err = run(capsys, *configure(backend, "--charge-with", "url", "--json"))

    assert code == 0, err
    shown = json.loads(out)
    assert (shown["charge_with"], shown["stripe_api_key_set"]) == ("url", False)
    assert store.hosted.get_hosted_charging("default") is None


def test_a_key_kept_when_omitted(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ("--charge-with", "stripe", "--stripe-api-key-file", key_file(tmp_path))
    assert run(capsys, *configure(backend, *args))[0] == 0
    sealed = assert_key_stored(store)

    code, out, _ = run(
        capsys, *configure(backend, "--event-url", "https://example.com/e", "--json")
    )

    assert code == 0 and json.loads(out)["charge_with"] == "stripe"
    assert assert_key_stored(store) == sealed


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--charge-with", "bogus"), "--charge-with"),
        (("--charge-with", "stripe"), "--stripe-api-key-file"),  # no key: none stored either
        (("--charge-with", "stripe", "--stripe-api-key-file", "/no/such/key"), "--stripe-api"),
        (("--charge-with", "url", "--stripe-api-key-file", "KEYFILE"), "--stripe-api-key-file"),
    ],
)
def test_bad_charging_options_exit_2_naming_the_option(
    backend: Backend,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    args: tuple[str, ...],
    named: str,
) -> None:
    given = tuple(key_file(tmp_path) if a == "KEYFILE" else a for a in args)
    code, out, err = run(capsys, *configure(backend, *given))
    assert code == 2 and out == ""
    assert named in err and err.count("\n") == 1
    assert KEY_TAIL not in err
    assert store.hosted.get_hosted_charging("default") is None


# invoices cancel


def dunning(store: Store) -> Dunning:
    scheduler = Scheduler(store, clock=SystemClock(), ssrf=SsrfGuard(allow_private=True))
    scheduler.default_tenant()
    return Dunning(scheduler, store)


def opened(store: Store, invoice_id: str = "in_1") -> None:
    dunning(store).report_failure(
        "default",
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


def test_cancel_stops_dunning_and_cancels_the_scheduled_attempts(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    opened(store)
    before = dunning(store).get("default", "in_1")

    code, out, err = run(
        capsys, "invoices", "cancel", "in_1", "--reason", "refunded", *backend.db_args(), "--json"
    )

    assert code == 0, err
    shown = json.loads(out)
    assert set(shown) == {"invoice_id", "state", "reason", "cancelled_attempts"}
    assert (shown["invoice_id"], shown["state"]) == ("in_1", "cancelled")
    assert shown["cancelled_attempts"] == [a.attempt for a in before.attempts]
    after = dunning(store).get("default", "in_1")
    assert after.state is InvoiceState.CANCELLED
    for attempt in after.attempts:
        job = store.get("default", attempt.job_id)
        assert job is not None and job.state is JobState.CANCELLED
    types = [e.type for e in store.invoice_events("default", "in_1")]
    assert "invoice.dunning_cancelled" in types


def test_cancelling_a_final_invoice_leaves_it_as_it_is(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    opened(store)
    dunning(store).mark_paid("default", "in_1")

    code, out, err = run(capsys, "invoices", "cancel", "in_1", "--reason", "r", *backend.db_args())
    assert code == 0, err
    assert "recovered: left as it is" in out
    code, out, _ = run(
        capsys, "invoices", "cancel", "in_1", "--reason", "r", *backend.db_args(), "--json"
    )
    assert code == 0
    assert (json.loads(out)["state"], json.loads(out)["cancelled_attempts"]) == ("recovered", [])
    assert dunning(store).get("default", "in_1").state is InvoiceState.RECOVERED


def test_cancelling_an_unknown_invoice_exits_2(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "invoices", "cancel", "in_nope", "--reason", "r", *backend.db_args()
    )
    assert code == 2 and out == "" and "in_nope" in err


@pytest.mark.parametrize("reason", ["", "   ", "x" * 1001])
def test_a_bad_reason_exits_2_and_changes_nothing(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], reason: str
) -> None:
    opened(store)

    code, _, err = run(capsys, "invoices", "cancel", "in_1", "--reason", reason, *backend.db_args())

    assert code == 2 and "--reason" in err
    assert dunning(store).get("default", "in_1").state is InvoiceState.RETRYING


# stripe check


def test_stripe_check_verifies_the_key_at_stripe_and_prints_the_set_up(
    backend: Backend,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    localstripe: LocalStripe,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RECOUP_STRIPE_API_BASE", localstripe.url)
    args = ("--charge-with", "stripe", "--stripe-api-key-file", key_file(tmp_path, LOCAL_KEY))
    assert run(capsys, *configure(backend, *args))[0] == 0

    code, out, err = run(
        capsys,
        "stripe",
        "check",
        "default",
        "--public-url",
        "https://recoup.example.com/",
        *backend.db_args(),
        "--json",
    )

    assert code == 0, err
    shown = json.loads(out)
    assert (shown["key_ok"], shown["livemode"], shown["charge_with"]) == (True, False, "stripe")
    assert shown["webhook_url"] == "https://recoup.example.com/v1/intake/stripe/default"
    assert "invoice.payment_failed" in shown["events"]
    assert "invoice.paid" in shown["events"] or "invoice.payment_succeeded" in shown["events"]
    assert LOCAL_KEY not in out + err
    code, out, _ = run(capsys, "stripe", "check", "default", *backend.db_args())
    assert code == 0 and "/v1/intake/stripe/default" in out and "Smart Retries off" in out


def test_stripe_check_without_a_key_exits_1(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "stripe", "check", "default", *backend.db_args(), "--json")

    assert code == 1
    shown = json.loads(out)
    assert (shown["key_ok"], shown["charge_with"]) == (False, "url")
    assert "--stripe-api-key-file" in shown["detail"]


# secrets


def test_new_key_prints_a_key_a_secret_box_takes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "secrets", "new-key")

    assert code == 0
    made = SecretBox([out.strip()])
    assert made.open(made.seal("x")) == "x"
    assert run(capsys, "secrets", "new-key")[1] != out  # a new one each time


def test_rotate_seals_every_secret_again_with_the_new_key(
    backend: Backend,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = os.environ["RECOUP_SECRET_KEY"]
    args = (
        "--charge-with",
        "stripe",
        "--stripe-api-key-file",
        key_file(tmp_path),
        "--stripe-webhook-secret",
        WEBHOOK_SECRET,
    )
    assert run(capsys, *configure(backend, *args))[0] == 0
    sealed_key = assert_key_stored(store)
    intake = store.get_intake_settings("default")
    assert intake is not None and intake.stripe_webhook_secret is not None
    sealed_secret = intake.stripe_webhook_secret
    new = new_key()
    monkeypatch.setenv("RECOUP_SECRET_KEY", f"{new},{old}")

    code, out, err = run(capsys, "secrets", "rotate", *backend.db_args(), "--json")

    assert code == 0, err
    assert json.loads(out) == {"stripe_api_keys": 1, "stripe_webhook_secrets": 1, "smtp_urls": 0}
    only_new = SecretBox([new])
    charging = store.hosted.get_hosted_charging("default")
    assert charging is not None and charging.api_key != sealed_key
    assert only_new.open(charging.api_key) == KEY
    rotated = store.get_intake_settings("default")
    assert rotated is not None and rotated.stripe_webhook_secret not in (None, sealed_secret)
    assert only_new.open(rotated.stripe_webhook_secret or "") == WEBHOOK_SECRET
    assert KEY_TAIL not in out + err and WEBHOOK_SECRET not in out + err
    # StripeIntake reads it back with the new key alone, as a restarted server would.
    scheduler = Scheduler(store, clock=SystemClock())
    reader = StripeIntake(Dunning(scheduler, store), store, box=only_new)
    assert reader.tenant_settings.settings("default").stripe_webhook_secret is not None
