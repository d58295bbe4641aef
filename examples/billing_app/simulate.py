"""Script a dunning run: invoices whose first charge fails, handed to Recoup, retried by Recoup
through the billing app's charge endpoint while Recoup's test clock moves a day at a time.

    .venv/bin/python -m examples.billing_app.simulate \\
        --billing-url http://127.0.0.1:8001 --recoup-url http://127.0.0.1:8000 --token rk_... \\
        [--invoices 20] [--days 21] [--no-advance] [--failed-at 2026-12-01T15:00:00Z] \\
        [--timezone America/New_York] [--country US] [--run-id demo1]

Needs: the billing app running (`python -m examples.billing_app`), a Recoup server on a test
clock (`recoup serve --clock virtual:…`) whose tenant's signing secret the app was given, and
the token of that tenant (or RECOUP_TOKEN). The gateway is the one the app charges through:
its in-process one at `{billing-url}/gateway`, or the `recoup gateway` given to the app.

Card scenarios, in turn: a soft decline that clears a few days later, a soft decline that
clears around paydays (1st and 15th), a hard decline (stolen card), and an expired card that
the customer updates on day `--update-day` (the gateway learns the new card and Recoup is told
the payment method changed). Every first charge is made at `--failed-at` (default: Recoup's
clock); each failure is reported to Recoup with `POST /v1/dunning/failures`; then the clock is
advanced one day at a time. At the end it prints how many invoices were recovered (paid in the
billing app's database), how many Recoup exhausted, and the gateway's double charges, which
must be 0 (the exit status is 1 otherwise).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx

from recoup.payments import GatewayClient, Scenario
from recoup.timekeeping.instants import format_utc, parse_instant

DAY = 86_400  # seconds
KINDS = ("soft_later", "payday", "hard", "expired")
NETWORKS = ("visa", "mastercard")
TIMEOUT = 60.0  # seconds: advancing Recoup's clock runs a day of retries before it answers


@dataclass(frozen=True)
class Planned:
    """One invoice of the run and its card's scenario."""

    invoice_id: str
    customer_id: str
    amount: int
    kind: str
    card: str
    network: str

    def scenario(self, timezone: str, index: int) -> Scenario:
        if self.kind == "soft_later":
            # Funds arrive 2–6 days after the first try: early retries fail, a later one works.
            return Scenario.soft("insufficient_funds", clears_after=timedelta(days=2 + index % 5))
        if self.kind == "payday":
            return Scenario.soft(
                "insufficient_funds", paydays=(1, 15), window_days=2, timezone=timezone
            )
        if self.kind == "hard":
            return Scenario.hard("stolen_card")
        return Scenario.expired()


def plan(run_id: str, count: int) -> list[Planned]:
    return [
        Planned(
            invoice_id=f"inv_{run_id}_{i:03d}",
            customer_id=f"cus_{run_id}_{i:03d}",
            amount=999 + 1000 * (i % 5),
            kind=KINDS[i % len(KINDS)],
            card=f"card_{run_id}_{i:03d}",
            network=NETWORKS[i % len(NETWORKS)],
        )
        for i in range(count)
    ]


@dataclass(frozen=True)
class Options:
    billing_url: str
    recoup_url: str
    token: str
    invoices: int = 20
    days: int = 21
    advance: bool = True
    update_day: int = 2
    failed_at: datetime | None = None
    timezone: str = "America/New_York"
    country: str = "US"
    run_id: str = ""


@dataclass(frozen=True)
class Report:
    failed_first: int
    recovered: int
    exhausted: int | None  # None: Recoup's invoice states could not be read
    still_open: int
    double_charges: int


def run(
    options: Options,
    *,
    billing: httpx.Client,
    recoup: httpx.Client,
    gateway_for: Callable[[str], GatewayClient],
    say: Callable[[str], None] = print,
) -> Report:
    """The whole run (see the module docstring); the HTTP clients are given so that tests can
    serve the apps in-process."""
    about = _ok(billing.get("/")).json()
    gateway_url = about["gateway_url"] or options.billing_url.rstrip("/") + "/gateway"
    gateway = gateway_for(gateway_url)
    charge_url = options.billing_url.rstrip("/") + about["charge_path"]
    start = options.failed_at or _recoup_now(recoup)
    run_id = options.run_id or secrets.token_hex(3)
    planned = plan(run_id, options.invoices)
    say(f"run {run_id}: {len(planned)} invoices, first charges at {format_utc(start)}")

    failed: list[Planned] = []
    for index, invoice in enumerate(planned):
        gateway.add_card(invoice.card, invoice.scenario(options.timezone, index))
        created = _ok(
            billing.post(
                "/invoices",
                json={
                    "id": invoice.invoice_id,
                    "customer_id": invoice.customer_id,
                    "amount": invoice.amount,
                    "currency": "usd",
                    "card_fingerprint": invoice.card,
                    "charge_at": format_utc(start),
                },
            )
        ).json()
        charge = created["charge"]
        if created["status"] == "paid" or charge is None:
            continue  # e.g. a payday card first charged inside its window
        failed.append(invoice)
        _ok(
            recoup.post(
                "/v1/dunning/failures",
                # A deterministic key: running the report again cannot open a second dunning.
                headers={"Idempotency-Key": f"failure:{invoice.invoice_id}"},
                json={
                    "invoice_id": invoice.invoice_id,
                    "customer_id": invoice.customer_id,
                    "amount": invoice.amount,
                    "currency": "usd",
                    "failed_at": format_utc(start),
                    "timezone": options.timezone,
                    "country": options.country,
                    "decline_code": charge["decline_code"],
                    "advice_code": charge["advice_code"],
                    "card": {"fingerprint": invoice.card, "network": invoice.network},
                    "gateway": "simulated",
                    "merchant_id": "acct_billing_example",
                    "charge_url": charge_url,
                },
            )
        )
    say(f"{len(failed)} first charges failed and were handed to Recoup")

    if options.advance:
        for day in range(1, options.days + 1):
            _ok(recoup.post("/v1/clock", json={"advance_seconds": DAY}))
            if day == options.update_day:
                _update_expired_cards(failed, gateway, recoup, start + timedelta(days=day), say)
            paid = _paid(billing, failed)
            say(f"day {day:2d}: {paid} of {len(failed)} recovered")

    recovered = _paid(billing, failed)
    exhausted = _exhausted(recoup, failed)
    stats = gateway.stats()
    ours = {p.invoice_id for p in planned}
    doubles = [i for i in stats["double_charged_invoices"] if i in ours]
    report = Report(
        failed_first=len(failed),
        recovered=recovered,
        exhausted=exhausted,
        still_open=len(failed) - recovered,
        double_charges=len(doubles),
    )
    say(f"recovered: {report.recovered} of {report.failed_first} (paid in the billing database)")
    if report.exhausted is None:
        say(f"exhausted: unknown (Recoup's invoices unreadable); still open: {report.still_open}")
    else:
        say(f"exhausted: {report.exhausted}; still open: {report.still_open}")
    say(f"double charges at the gateway: {report.double_charges}")
    return report


def _update_expired_cards(
    failed: list[Planned],
    gateway: GatewayClient,
    recoup: httpx.Client,
    at: datetime,
    say: Callable[[str], None],
) -> None:
    # The customer enters a new card: the gateway accepts it from `at`, and Recoup, told the
    # payment method changed, retries once promptly.
    for invoice in failed:
        if invoice.kind != "expired":
            continue
        gateway.update_card(invoice.card, at=at)
        answer = recoup.post(
            f"/v1/dunning/invoices/{invoice.invoice_id}/payment-method-updated",
            headers={"Idempotency-Key": f"card-updated:{invoice.invoice_id}"},
        )
        if answer.is_error:
            say(f"  {invoice.invoice_id}: Recoup refused the card update ({answer.status_code})")
    say(f"  expired cards updated at {format_utc(at)}")


def _paid(billing: httpx.Client, invoices: list[Planned]) -> int:
    wanted = {p.invoice_id for p in invoices}
    rows = _ok(billing.get("/invoices")).json()["invoices"]
    return sum(1 for row in rows if row["id"] in wanted and row["status"] == "paid")


def _exhausted(recoup: httpx.Client, invoices: list[Planned]) -> int | None:
    count = 0
    for invoice in invoices:
        answer = recoup.get(f"/v1/dunning/invoices/{invoice.invoice_id}")
        if answer.is_error:
            return None
        count += answer.json().get("state") == "exhausted"
    return count


def _recoup_now(recoup: httpx.Client) -> datetime:
    answer = recoup.get("/v1/clock")
    if answer.is_success:
        return parse_instant("now", str(answer.json()["now"]))
    return datetime.now(UTC)


def _ok(response: httpx.Response) -> httpx.Response:
    if response.is_error:
        request = response.request
        raise SystemExit(
            f"simulate: {request.method} {request.url} answered {response.status_code}: "
            f"{response.text[:300]}"
        )
    return response


def parse_args(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m examples.billing_app.simulate",
        description="Script a dunning run against Recoup.",
    )
    parser.add_argument("--billing-url", default="http://127.0.0.1:8001")
    parser.add_argument("--recoup-url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", default=os.environ.get("RECOUP_TOKEN"))
    parser.add_argument("--invoices", type=int, default=20, help="how many (default: 20)")
    parser.add_argument("--days", type=int, default=21, help="days to advance (default: 21)")
    parser.add_argument(
        "--no-advance", action="store_true", help="report the failures, leave the clock alone"
    )
    parser.add_argument("--update-day", type=int, default=2, help="day expired cards are updated")
    parser.add_argument("--failed-at", help="instant of the first charges (default: Recoup's now)")
    parser.add_argument("--timezone", default="America/New_York", help="the customers' zone")
    parser.add_argument("--country", default="US", help="the customers' country (holidays)")
    parser.add_argument("--run-id", default="", help="prefix of the ids (default: random)")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("--token (or RECOUP_TOKEN) is required: a Recoup API token of the tenant")
    if args.invoices < 1 or args.days < 0:
        parser.error("--invoices must be at least 1 and --days at least 0")
    try:
        failed_at = None if args.failed_at is None else parse_instant("--failed-at", args.failed_at)
    except ValueError as exc:
        parser.error(str(exc))
    return Options(
        billing_url=args.billing_url,
        recoup_url=args.recoup_url,
        token=args.token,
        invoices=args.invoices,
        days=args.days,
        advance=not args.no_advance,
        update_day=args.update_day,
        failed_at=failed_at,
        timezone=args.timezone,
        country=args.country,
        run_id=args.run_id,
    )


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    auth = {"Authorization": f"Bearer {options.token}"}
    with (
        httpx.Client(base_url=options.billing_url, timeout=TIMEOUT) as billing,
        httpx.Client(base_url=options.recoup_url, headers=auth, timeout=TIMEOUT) as recoup,
    ):
        report = run(options, billing=billing, recoup=recoup, gateway_for=GatewayClient)
    return 0 if report.double_charges == 0 else 1


__all__ = ["KINDS", "Options", "Planned", "Report", "main", "parse_args", "plan", "run"]

if __name__ == "__main__":
    sys.exit(main())
