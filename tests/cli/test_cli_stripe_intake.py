"""`recoup tenants configure --stripe-webhook-secret / --default-timezone`: the Stripe intake's
settings from the command line, the secret never printed, bad input one line (exit 2)."""

from __future__ import annotations

import io
import json
import os

import pytest

from recoup.sealed import SecretBox
from tests.cli.test_cli import run
from tests.storage.conftest import Backend, Store


def stored_secret(stored: str | None) -> str | None:
    """The secret as stored: sealed (never the secret itself), opening to it."""
    assert stored is not None and stored.startswith("sealed:v1:") and SECRET not in stored
    return SecretBox([os.environ["RECOUP_SECRET_KEY"]]).open(stored)


SECRET = "whsec_" + "cl1S3cr3t" * 4


def test_the_secret_is_stored_never_printed_kept_when_omitted_and_removed(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    configure = ("tenants", "configure", "default", *backend.db_args())
    code, out, err = run(
        capsys,
        *configure,
        "--stripe-webhook-secret",
        SECRET,
        "--default-timezone",
        "Europe/Paris",
        "--json",
    )
    assert code == 0, err
    shown = json.loads(out)
    assert shown["stripe_webhook_secret_set"] is True
    assert shown["default_timezone"] == "Europe/Paris"
    assert SECRET not in out + err
    stored = store.get_intake_settings("default")
    assert stored is not None and stored_secret(stored.stripe_webhook_secret) == SECRET
    code, out, _ = run(capsys, *configure, "--event-url", "https://example.com/e")
    assert code == 0 and SECRET not in out and "/v1/intake/stripe/default" in out
    kept = store.get_intake_settings("default")
    assert kept is not None
    assert (stored_secret(kept.stripe_webhook_secret), kept.default_timezone) == (
        SECRET,
        "Europe/Paris",
    )
    code, out, _ = run(capsys, *configure, "--no-stripe-webhook-secret", "--json")
    assert code == 0 and json.loads(out)["stripe_webhook_secret_set"] is False
    removed = store.get_intake_settings("default")
    assert removed is not None and removed.stripe_webhook_secret is None


def test_a_dash_reads_the_secret_from_stdin(
    backend: Backend,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    code, out, err = run(
        capsys,
        "tenants",
        "configure",
        "default",
        *backend.db_args(),
        "--stripe-webhook-secret",
        "-",
    )
    assert code == 0, err
    stored = store.get_intake_settings("default")
    assert stored is not None and stored_secret(stored.stripe_webhook_secret) == SECRET
    assert SECRET not in out + err


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--stripe-webhook-secret", "sk_live_" + "z" * 24], "--stripe-webhook-secret"),
        (["--stripe-webhook-secret", SECRET + " trailing"], "--stripe-webhook-secret"),
        (["--default-timezone", "Mars/Olympus"], "--default-timezone"),
        (["--stripe-webhook-secret", SECRET, "--no-stripe-webhook-secret"], "--no-stripe"),
    ],
)
def test_bad_intake_settings_are_one_line_naming_the_option_and_store_nothing(
    backend: Backend,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    named: str,
) -> None:
    code, out, err = run(capsys, "tenants", "configure", "default", *args, *backend.db_args())
    assert code == 2 and named in err and err.count("\n") == 1 and out == ""
    assert "z" * 24 not in err and SECRET not in err
    assert store.get_intake_settings("default") is None
    assert store.get_settings("default") is None
