"""Start the billing app:

    .venv/bin/python -m examples.billing_app --port 8001 --secret whsec_... \\
        [--host 127.0.0.1] [--db billing.db] [--gateway-url http://127.0.0.1:8090]

`--secret` is the tenant's signing secret as Recoup shows it (or set RECOUP_SIGNING_SECRET,
which keeps it out of the process list). Without `--gateway-url` the app charges an
in-process simulated gateway, served at /gateway; with it, a `recoup gateway` server.
"""

from __future__ import annotations

import argparse
import os
import sys

import uvicorn

from recoup.errors import InvalidInput
from recoup.payments import GatewayClient, SimulatedGateway
from recoup.payments.provider import PaymentProvider
from recoup.timekeeping.clock import SystemClock

from .app import create_app


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m examples.billing_app", description="The example billing app."
    )
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--secret",
        default=os.environ.get("RECOUP_SIGNING_SECRET"),
        help="the tenant's whsec_… signing secret (default: $RECOUP_SIGNING_SECRET)",
    )
    parser.add_argument("--db", default="billing.db", help="the SQLite file (default: billing.db)")
    parser.add_argument(
        "--gateway-url", help="a `recoup gateway` to charge through (default: in-process)"
    )
    args = parser.parse_args(argv)
    if not args.secret:
        parser.error("--secret (or RECOUP_SIGNING_SECRET) is required: Recoup's whsec_… secret")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    provider: PaymentProvider
    if args.gateway_url:
        provider = GatewayClient(args.gateway_url)
    else:
        # The system clock only serves calls without an instant; charges carry their own.
        provider = SimulatedGateway(SystemClock())
    try:
        app = create_app(
            db_path=args.db, secret=args.secret, provider=provider, gateway_url=args.gateway_url
        )
    except InvalidInput as exc:
        sys.exit(f"billing_app: {exc}")
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
