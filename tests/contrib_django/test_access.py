"""The Django app's `access_of` asks a real Recoup API server (SQLite, in a thread) for a
customer's access, with the app's settings."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from recoup.client import Unauthorized
from recoup.contrib.django import access_of
from recoup.dunning.access import Access
from recoup.storage import open_api_tables, open_store
from recoup.tenancy import issue_token, new_tenant
from recoup.timekeeping.clock import SystemClock
from tests.support import ServerThread


@pytest.fixture
def recoup_api(tmp_path: Path) -> Iterator[tuple[str, str, object]]:
    from recoup.api.app import create_app
    from tests.api.conftest import api_settings

    store = open_store(f"sqlite:///{tmp_path / 'recoup.db'}")
    store.migrate()
    now = datetime.now(UTC)
    store.ensure_tenant(new_tenant("acme", now=now))
    token = issue_token(open_api_tables(store), "acme", now=now).secret
    app = create_app(store, clock=SystemClock(), settings=api_settings())
    try:
        with ServerThread(app) as served:
            yield served.url, token, store
    finally:
        store.close()


def test_access_of_reads_the_customers_access_from_recoup(
    recoup_api: tuple[str, str, object],
) -> None:
    url, token, store = recoup_api
    customers = store.customers  # type: ignore[attr-defined]
    customers.put_customer("acme", "cus_1", email="ada@example.com", at=datetime.now(UTC))
    customers.set_access("acme", "cus_1", Access.RESTRICTED, at=datetime.now(UTC))
    with override_settings(RECOUP_API_URL=url, RECOUP_API_TOKEN=token):
        assert access_of("cus_1") == "restricted"
        assert access_of("cus_unknown") == "active"  # nothing of theirs in dunning
        customers.set_access("acme", "cus_1", Access.ACTIVE, at=datetime.now(UTC) + timedelta(1))
        assert access_of("cus_1") == "active"
    with override_settings(RECOUP_API_URL=url, RECOUP_API_TOKEN="rk_wrong"):
        with pytest.raises(Unauthorized):
            access_of("cus_1")


def test_access_of_without_its_settings_says_which() -> None:
    with override_settings(RECOUP_API_URL=None, RECOUP_API_TOKEN="t"):
        with pytest.raises(ImproperlyConfigured, match="RECOUP_API_URL"):
            access_of("cus_1")
