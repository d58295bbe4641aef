"""Screenshots of a running dashboard: the invoices page, an invoice, a job's run log and the
analytics report, as docs/images/dashboard/ shows them (the "before" ones were taken with this
from an older commit's `recoup serve` over a `recoup demo --db` database).

    python scripts/dashboard_screenshots.py --url http://127.0.0.1:8000 --token rcp_… \
        --out docs/images/dashboard/before [--chromium /usr/bin/chromium]

The invoice shown is the first one the API lists that was recovered by a later attempt
(else the first one), and the run log is that of the first charge attempt's job the API
lists that ran (`dunning-retry-…`; else the first job that ran).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import sync_playwright

VIEWPORT = {"width": 1280, "height": 900}
WAIT_MS = 15_000


def listed(url: str, token: str, path: str, key: str) -> list[dict[str, Any]]:
    """The first page (up to 200) of a /v1 list."""
    answer = httpx.get(
        f"{url}{path}",
        params={"limit": 200},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    answer.raise_for_status()
    found: list[dict[str, Any]] = answer.json()[key]
    return found


def chosen_invoice(url: str, token: str) -> str:
    """An invoice worth showing: recovered by a later attempt, if the first page has one."""
    invoices = listed(url, token, "/v1/dunning/invoices", "invoices")
    for invoice in invoices:
        if invoice["state"] == "recovered" and invoice["reason"] != "recovered by attempt 1":
            return str(invoice["invoice_id"])
    return str(invoices[0]["invoice_id"])


def chosen_job(url: str, token: str) -> str:
    """A job that ran, a charge attempt if the first page has one."""
    ran = [j for j in listed(url, token, "/v1/jobs", "jobs") if j["attempts"] > 0]
    charges = [j for j in ran if (j["name"] or "").startswith("dunning-retry-")]
    return str((charges or ran)[0]["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    url = args.url.rstrip("/")
    invoice_id = chosen_invoice(url, args.token)
    job_id = chosen_job(url, args.token)
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium)
        context = browser.new_context(base_url=url, viewport=VIEWPORT)  # type: ignore[arg-type]
        context.set_default_timeout(WAIT_MS)
        page = context.new_page()
        page.goto("/login")
        page.get_by_label("API token").fill(args.token)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_load_state("networkidle")
        shots = [
            ("/invoices", "invoices.png", False),
            (f"/invoices/{invoice_id}", "invoice.png", True),
            (f"/jobs/{job_id}", "job-run-log.png", True),
            ("/analytics", "report.png", False),
        ]
        for path, name, whole in shots:
            page.goto(path)
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(args.out / name), full_page=whole)
            print(args.out / name)
        browser.close()


if __name__ == "__main__":
    main()
