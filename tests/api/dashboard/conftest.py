"""The dashboard's fixtures: a `Desk` (tests/api/dashboard/desk.py) over each backend's store,
and the headless chromium the browser tests share."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from recoup.storage import Store
from tests.api.dashboard.desk import Desk, make_desk

if TYPE_CHECKING:
    from playwright.sync_api import Browser

# Debian's chromium (installed by .ci/run, never downloaded at run time).
CHROMIUM = os.environ.get("RECOUP_TEST_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture
def desk(store: Store) -> Desk:
    return make_desk(store)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """One headless chromium per browser-test module, driven by Playwright; without it the
    tests skip, saying why (under CI=true they fail instead). The modules that use it skip
    themselves first when Playwright is missing. Not per session: Playwright's sync API keeps
    an event loop running on the thread while it is open, which `asyncio.run` elsewhere
    refuses."""
    from playwright.sync_api import sync_playwright

    path = shutil.which(CHROMIUM) or (CHROMIUM if os.access(CHROMIUM, os.X_OK) else None)
    if path is None:
        reason = f"no chromium at {CHROMIUM} (.ci/run installs Debian's: apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path)
        yield browser
        browser.close()
