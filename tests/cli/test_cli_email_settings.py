"""`recoup tenants configure`'s email options, on both backends: the SMTP URL stored sealed and
its password never printed, the sender, the link template, the templates directory and the
unsubscribe switch; every bad value one line naming its option, exit 2, nothing stored."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from recoup.sealed import SecretBox
from tests.cli.test_cli import run
from tests.storage.conftest import Backend, Store

PASSWORD = "Sm7pPa55w0rd"
SMTP_URL = f"smtp://billing:{PASSWORD}@127.0.0.1:2525?starttls=never"
SENDER = "Acme Billing <billing@acme.example>"
LINK = "https://app.example/billing/update?token={token}"


def configure(backend: Backend, *args: str) -> tuple[str, ...]:
    return ("tenants", "configure", "default", *backend.db_args(), *args)


def opened(store: Store) -> str | None:
    found = store.messages.get_message_settings("default")
    if found is None or found.smtp_url is None:
        return None
    assert found.smtp_url.startswith("sealed:v1:") and PASSWORD not in found.smtp_url
    return SecretBox([os.environ["RECOUP_SECRET_KEY"]]).open(found.smtp_url)


def test_the_email_settings_are_stored_with_the_url_sealed_and_never_printed(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = (
        "--smtp-url",
        SMTP_URL,
        "--email-from",
        SENDER,
        "--reply-to",
        "help@acme.example",
        "--update-card-url",
        LINK,
        "--email-templates",
        str(tmp_path),
        "--allow-unsubscribe",
    )
    code, out, err = run(capsys, *configure(backend, *args, "--json"))
    assert code == 0, err
    shown = json.loads(out)
    assert shown["smtp_configured"] is True
    assert shown["email_from"] == SENDER and shown["reply_to"] == "help@acme.example"
    assert shown["update_card_url"] == LINK and shown["allow_unsubscribe"] is True
    assert shown["email_templates"] == str(tmp_path.resolve())
    assert PASSWORD not in out + err
    assert opened(store) == SMTP_URL

    # Omitted options are kept; the human lines say emails go out, without the password.
    code, out, err = run(capsys, *configure(backend, "--no-allow-unsubscribe"))
    assert code == 0, err
    assert "emails:     from Acme Billing" in out and PASSWORD not in out + err
    kept = store.messages.get_message_settings("default")
    assert kept is not None and kept.email_from == SENDER and kept.allow_unsubscribe is False
    assert opened(store) == SMTP_URL

    code, out, err = run(capsys, *configure(backend, "--no-smtp-url", "--json"))
    assert code == 0, err
    assert json.loads(out)["smtp_configured"] is False and opened(store) is None


def test_a_dash_reads_the_smtp_url_from_stdin(
    backend: Backend,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(SMTP_URL + "\n"))
    code, out, err = run(
        capsys, *configure(backend, "--smtp-url", "-", "--email-from", SENDER, "--json")
    )
    assert code == 0, err
    assert json.loads(out)["smtp_configured"] is True and PASSWORD not in out
    assert opened(store) == SMTP_URL


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("--smtp-url", f"http://u:{PASSWORD}@mail.example", "--email-from", SENDER), "--smtp-url"),
        (("--smtp-url", f"smtp://u:{PASSWORD}@mail.example?starttls=maybe"), "--smtp-url"),
        (("--smtp-url", f"smtps://u:{PASSWORD}@:465", "--email-from", SENDER), "--smtp-url"),
        (("--smtp-url", SMTP_URL), "--email-from"),  # an SMTP server needs a sender
        (("--email-from", "Acme Billing"), "--email-from"),
        (("--email-from", "a@acme.example, b@acme.example"), "--email-from"),
        (("--reply-to", "nobody"), "--reply-to"),
        (("--update-card-url", "https://app.example/billing"), "--update-card-url"),
        (("--update-card-url", "http://app.example/u?t={token}"), "--update-card-url"),
        (("--update-card-url", "ftp://app.example/{token}"), "--update-card-url"),
        (("--email-templates", "/no/such/directory"), "--email-templates"),
        (("--smtp-url", SMTP_URL, "--no-smtp-url"), "--no-smtp-url"),
    ],
)
def test_a_bad_email_setting_is_one_line_naming_the_option_and_stores_nothing(
    backend: Backend,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    option: str,
) -> None:
    code, out, err = run(capsys, *configure(backend, *args))
    assert code == 2 and out == "", err
    assert option in err and err.count("\n") == 1
    assert PASSWORD not in err
    assert store.messages.get_message_settings("default") is None
    assert store.get_settings("default") is None


def test_a_loopback_http_link_is_accepted_for_local_development(
    backend: Backend, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    link = "http://127.0.0.1:8000/billing?token={token}"
    code, out, err = run(capsys, *configure(backend, "--update-card-url", link, "--json"))
    assert code == 0, err
    assert json.loads(out)["update_card_url"] == link


def test_secrets_rotate_seals_the_smtp_url_again_with_the_new_key(
    backend: Backend,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from recoup.sealed import new_key

    code, _, err = run(capsys, *configure(backend, "--smtp-url", SMTP_URL, "--email-from", SENDER))
    assert code == 0, err
    before = store.messages.get_message_settings("default")
    old = os.environ["RECOUP_SECRET_KEY"]
    fresh = new_key()
    monkeypatch.setenv("RECOUP_SECRET_KEY", f"{fresh},{old}")
    code, out, err = run(capsys, "secrets", "rotate", *backend.db_args(), "--json")
    assert code == 0, err
    assert json.loads(out)["smtp_urls"] == 1
    after = store.messages.get_message_settings("default")
    assert before is not None and after is not None and after.smtp_url != before.smtp_url
    assert after.smtp_url is not None
    assert SecretBox([fresh]).open(after.smtp_url) == SMTP_URL
