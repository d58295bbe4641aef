"""The demo's HTML report in a real headless browser (Debian's chromium via Playwright, as
tests/api/dashboard/test_browser.py): it carries the nightly comparison of the terminal
output and a "What next"."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from recoup.cli.demo import _write_html
from recoup.demo.run import DemoOptions, run_demo
from recoup.dunning.policy import resolve_policy_text

try:
    from playwright import sync_api as playwright_api
except ModuleNotFoundError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("playwright is in the dev extra (pip install -e '.[dev]')", allow_module_level=True)
expect = playwright_api.expect

CHROMIUM = os.environ.get("RECOUP_TEST_CHROMIUM", "/usr/bin/chromium")


@pytest.mark.slow
def test_the_report_shows_the_nightly_comparison_and_what_next(tmp_path: Path) -> None:
    path = shutil.which(CHROMIUM) or (CHROMIUM if os.access(CHROMIUM, os.X_OK) else None)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no chromium at {CHROMIUM}")
        pytest.skip(f"no chromium at {CHROMIUM}")
    text, _ = resolve_policy_text("business-days", lambda p: Path(p).read_text("utf-8"))
    options = DemoOptions(
        size=40, seed=3, policy_name="business-days", policy_toml=text, db_path=tmp_path / "r.db"
    )
    result = run_demo(options)
    report = Path(_write_html(result))
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path)
        page = browser.new_page()
        page.goto(report.as_uri())
        expect(
            page.get_by_role("heading", name="Recoup against the old nightly batch")
        ).to_be_visible()
        nightly = page.get_by_test_id("extra-1")
        expect(nightly).to_contain_text("recovered by a retry")
        expect(nightly).to_contain_text(f"of {result.nightly.invoices}")
        expect(page.get_by_role("heading", name="What next")).to_be_visible()
        expect(page.get_by_test_id("what-next")).to_contain_text("/v1/dunning/failures")
        browser.close()
