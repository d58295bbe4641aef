"""A dump of the database alone reveals no provider secret, on both backends: a tenant's
Stripe API key, its Stripe webhook secret and its SMTP server's password, set through the
command line and through the service, appear nowhere in any row of any table, not even in
part; the same dump with the secret key opens them, so it is the key, kept outside the
database, that matters."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recoup.cli import main
from recoup.jobs.scheduler import Scheduler
from recoup.recovery.email_settings import EmailSettings
from recoup.recovery.hosted_settings import HostedSettings
from recoup.recovery.records import KEEP
from recoup.recovery.service import Dunning
from recoup.recovery.stripe_intake import StripeIntake
from recoup.sealed import SecretBox, SecretUnreadable, new_key
from recoup.tenancy import new_tenant
from tests.storage.conftest import Backend, Store

KEY = "rk_live_" + "N0tInTh3Dump" * 4
WEBHOOK_SECRET = "whsec_" + "Dump5afe" * 5
OTHER_KEY = "sk_test_" + "S3rv1ceK3y" * 4
OTHER_SECRET = "whsec_" + "S3rv1ce" * 6
SMTP_PASSWORD = "Sm7pN0tInDump" * 2
OTHER_SMTP_PASSWORD = "Sm7pS3rv1ce" * 2
SMTP_URL = f"smtp://billing:{SMTP_PASSWORD}@127.0.0.1:2525"
OTHER_SMTP_URL = f"smtps://acme:{OTHER_SMTP_PASSWORD}@mail.acme.example"
SEALED = re.compile(r"sealed:v1:[A-Za-z0-9_=-]+")
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def slices(secret: str, width: int = 12) -> set[str]:
    return {secret[i : i + width] for i in range(len(secret) - width + 1)}


def configured(backend: Backend, store: Store, tmp_path: Path) -> None:
    """The default tenant through the CLI; another tenant through the service."""
    key_file = tmp_path / "stripe.key"
    key_file.write_text(KEY, encoding="utf-8")
    code = main(
        [
            "tenants",
            "configure",
            "default",
            *backend.db_args(),
            "--charge-with",
            "stripe",
            "--stripe-api-key-file",
            str(key_file),
            "--stripe-webhook-secret",
            WEBHOOK_SECRET,
            "--smtp-url",
            SMTP_URL,
            "--email-from",
            "billing@example.com",
        ]
    )
    assert code == 0
    store.ensure_tenant(new_tenant("acme", now=T0))
    box = SecretBox([os.environ["RECOUP_SECRET_KEY"]])
    hosted = HostedSettings(store.hosted, box, now=lambda: T0)
    hosted.save(hosted.settled("acme", charge_with="stripe", api_key=OTHER_KEY))
    intake = StripeIntake(Dunning(Scheduler(store), store), store, box=box)
    intake.tenant_settings.save(
        intake.tenant_settings.settled(
            "acme", stripe_webhook_secret=OTHER_SECRET, default_timezone=KEEP
        )
    )
    emails = EmailSettings(store.messages, box, now=lambda: T0)
    emails.save(
        emails.settled(
            "acme",
            smtp_url=OTHER_SMTP_URL,
            email_from="Acme <billing@acme.example>",
            reply_to=KEEP,
            update_card_url=KEEP,
            templates_dir=KEEP,
            allow_unsubscribe=KEEP,
        )
    )


def test_a_dump_alone_reveals_no_secret_and_the_key_opens_them(
    backend: Backend,
    store: Store,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    configured(backend, store, tmp_path)
    capsys.readouterr()

    dump = backend.dump()

    assert "hosted_charging" in dump and "acme" in dump  # the rows are in it
    assert "message_settings" in dump and "billing@acme.example" in dump

    for secret in (
        KEY,
        WEBHOOK_SECRET,
        OTHER_KEY,
        OTHER_SECRET,
        SMTP_PASSWORD,
        OTHER_SMTP_PASSWORD,
    ):
        leaked = [part for part in slices(secret) if part in dump]
        assert leaked == [], f"{secret[:6]}…: {leaked[:3]}"
    sealed = SEALED.findall(dump)
    assert len(sealed) == 6
    box = SecretBox([os.environ["RECOUP_SECRET_KEY"]])
    opened = {box.open(value) for value in sealed}
    assert opened == {KEY, WEBHOOK_SECRET, OTHER_KEY, OTHER_SECRET, SMTP_URL, OTHER_SMTP_URL}
    stranger = SecretBox([new_key()])
    for value in sealed:
        with pytest.raises(SecretUnreadable):
            stranger.open(value)
