"""The Django app's update-token helper reads the secret from the app's settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from recoup.contrib.django import verify_update_token
from recoup.jobs.signing import new_signing_secret
from recoup.messages.tokens import InvalidUpdateToken, TokenProblem, issue_update_token

NOW = datetime(2026, 6, 23, 15, 0, tzinfo=UTC)


def token(secret: str) -> str:
    return issue_update_token(
        secret,
        tenant="acme",
        customer_id="cus_1",
        invoice_id="inv_1",
        expires_at=NOW + timedelta(days=14),
    )


def test_a_token_signed_with_the_apps_secret_verifies_for_its_customer() -> None:
    found = verify_update_token(token(settings.RECOUP_SIGNING_SECRET), customer_id="cus_1", now=NOW)
    assert (found.tenant, found.customer_id, found.invoice_id) == ("acme", "cus_1", "inv_1")
    with pytest.raises(InvalidUpdateToken) as exc:
        verify_update_token(token(settings.RECOUP_SIGNING_SECRET), customer_id="cus_2", now=NOW)
    assert exc.value.problem is TokenProblem.ANOTHER_CUSTOMER


def test_a_rotation_in_the_settings_applies_at_once() -> None:
    old = token(settings.RECOUP_SIGNING_SECRET)
    new = new_signing_secret()
    with override_settings(RECOUP_SIGNING_SECRET=[new]), pytest.raises(InvalidUpdateToken):
        verify_update_token(old, now=NOW)
    with override_settings(RECOUP_SIGNING_SECRET=[new, settings.RECOUP_SIGNING_SECRET]):
        assert verify_update_token(old, now=NOW).customer_id == "cus_1"


def test_a_missing_secret_is_improperly_configured() -> None:
    with override_settings(RECOUP_SIGNING_SECRET=None), pytest.raises(ImproperlyConfigured):
        verify_update_token(token(new_signing_secret()), now=NOW)
