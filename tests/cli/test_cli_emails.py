"""`recoup emails preview`: the email a tenant's customers get, rendered with sample data, and
its errors (one line naming the option and what it allows, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recoup.messages.kinds import MessageKind
from tests.cli.test_cli import run
from tests.storage.conftest import Backend, Store


@pytest.fixture(autouse=True)
def _no_database_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECOUP_DB", raising=False)


def test_preview_prints_the_subject_and_the_text_part(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "emails", "preview", "--tenant", "Acme", "--event", "retry_failed")
    assert code == 0, err
    assert out.startswith("Subject: We still couldn't take your $19.99 payment to Acme\n\n")
    assert "Our next try is on Friday, June 26, 2026." in out
    assert "Update your card" in out and "<" not in out


def test_preview_html_prints_the_html_part(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "emails", "preview", "--tenant", "Acme", "--event", "exhausted", "--html"
    )
    assert code == 0
    assert out.startswith("<!DOCTYPE html>") and "your access has been paused" in out


@pytest.mark.parametrize("kind", [k.value for k in MessageKind])
def test_preview_json_has_both_parts_of_every_kind(
    kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "emails",
        "preview",
        "--tenant",
        "Acme",
        "--event",
        kind,
        "--json",
        "--locale",
        "de-DE",
    )
    assert code == 0
    shown = json.loads(out)
    assert set(shown) == {"tenant", "event", "locale", "timezone", "subject", "text", "html"}
    assert shown["event"] == kind and shown["locale"] == "de-DE"
    assert "19,99\xa0$" in shown["text"] and "19,99\xa0$" in shown["html"]


def test_preview_uses_the_tenants_templates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "recovered.subject.txt").write_text("Thanks from {{ tenant_name }}!")
    code, out, _ = run(
        capsys, "emails", "preview", "--tenant", "Acme", "--event", "recovered",
        "--templates", str(tmp_path),
    )  # fmt: skip
    assert code == 0 and out.startswith("Subject: Thanks from Acme!\n")


@pytest.mark.parametrize(
    ("args", "option", "allowed"),
    [
        (["--event", "payment-failed"], "--event", "payment_failed, retry_failed, final_warning"),
        (["--event", "recovered", "--locale", "xx_QQ"], "--locale", 'such as "en"'),
        (["--event", "recovered", "--templates", "/nonexistent/dir"], "--templates", "directory"),
    ],
)
def test_bad_options_exit_2_with_one_line_naming_the_option(
    args: list[str], option: str, allowed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "emails", "preview", "--tenant", "Acme", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: {option}:") and allowed in err


def test_a_broken_template_names_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "recovered.txt").write_text("{{ nobody }}")
    code, _, err = run(
        capsys, "emails", "preview", "--tenant", "Acme", "--event", "recovered",
        "--templates", str(tmp_path),
    )  # fmt: skip
    assert code == 2 and "recovered.txt" in err and err.count("\n") == 1


def test_with_a_database_the_final_action_is_the_tenants_policys(
    backend: Backend, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "cancel.toml"
    policy.write_text('name = "cancels"\nfinal_action = "cancel"\ngaps = [{ days = 2 }]\n')
    assert run(capsys, "tenants", "create", "acme", *backend.db_args())[0] == 0
    code, _, err = run(
        capsys, "tenants", "configure", "acme", "--policy", str(policy), *backend.db_args()
    )
    assert code == 0, err
    code, out, err = run(
        capsys, "emails", "preview", "--tenant", "acme", "--event", "final_warning",
        *backend.db_args(),
    )  # fmt: skip
    assert code == 0, err
    assert "your subscription will be cancelled" in out
    code, _, err = run(
        capsys, "emails", "preview", "--tenant", "nobody", "--event", "recovered",
        *backend.db_args(),
    )  # fmt: skip
    assert code == 2 and "no tenant 'nobody'" in err


def test_with_a_database_the_preview_is_the_email_the_tenants_settings_make(
    backend: Backend, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "retry_failed.subject.txt").write_text("{{ sender_name }} tried again")
    assert run(capsys, "tenants", "create", "acme", *backend.db_args())[0] == 0
    code, _, err = run(
        capsys, "tenants", "configure", "acme", *backend.db_args(),
        "--smtp-url", "smtp://127.0.0.1:2525",
        "--email-from", "Acme Billing <billing@acme.example>",
        "--reply-to", "help@acme.example",
        "--update-card-url", "https://app.example/billing?token={token}",
        "--email-templates", str(tmp_path),
        "--allow-unsubscribe",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run(
        capsys, "emails", "preview", "--tenant", "acme", "--event", "retry_failed", "--json",
        *backend.db_args(),
    )  # fmt: skip
    assert code == 0, err
    shown = json.loads(out)
    assert shown["subject"] == "Acme Billing tried again"  # the tenant's own template
    assert "https://app.example/billing?token=SAMPLE-TOKEN" in shown["text"]
    assert "https://app.example/billing?token=SAMPLE-TOKEN&unsubscribe=1" in shown["text"]
    assert "help@acme.example" in shown["text"] and "Acme Billing" in shown["text"]
    # --templates replaces the tenant's directory for this preview.
    code, out, _ = run(
        capsys, "emails", "preview", "--tenant", "acme", "--event", "retry_failed",
        "--templates", str(tmp_path / "."), *backend.db_args(),
    )  # fmt: skip
    assert code == 0 and out.startswith("Subject: Acme Billing tried again")
