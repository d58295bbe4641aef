"""`recoup gateway`: the simulated payment gateway as an HTTP server, on the system clock.

Contract:

    recoup gateway [--host 127.0.0.1] [--port 8090] [--seed N] [--scenarios FILE.toml]

Endpoints are those of `recoup.payments.server` (charges, lookups, admin calls to add cards,
update them and inject faults, and `/stats`). SIGTERM or SIGINT stops it.

The scenario file is TOML: the `world` whose odds cards with `world_odds = true` follow
(a packaged world's name, `calibrated`, `flat` or `night-owl`, or a `[world]` table in the
format of `recoup.payments.world`; default `calibrated`), one `[cards.<fingerprint>]` table
per card that declines (cards not listed succeed), and `[[faults]]` to inject at start. Keys
are those of the JSON bodies (`recoup.payments.wire`); only `decline_code` and `kind` are
required:

    world = "calibrated"             # Recurly's hours, paydays by country (sources inside)

    [cards.card_timed]               # soft: a retry succeeds with the world's odds at its
    decline_code = "insufficient_funds"   # local hour, weekday and day of the month
    world_odds = true
    timezone = "America/New_York"
    country = "US"
    network = "visa"

    [cards.card_nsf]                 # soft: clears three days after its first try
    decline_code = "insufficient_funds"
    clears_after_hours = 72

    [cards.card_payday]              # soft: succeeds on the 1st and 15th and 2 days after
    decline_code = "insufficient_funds"
    paydays = [1, 15]
    window_days = 2
    timezone = "America/New_York"

    [cards.card_stolen]              # hard: never clears
    decline_code = "stolen_card"

    [cards.card_dnh]                 # hard through the advice code
    decline_code = "do_not_honor"
    advice_code = "do_not_try_again"

    [cards.card_expired]             # clears once POST /cards/card_expired/update is called
    decline_code = "expired_card"
    clears_on_update = true

    [[faults]]                       # stripe's maintenance window: 503 inside it
    kind = "unavailable"
    gateway = "stripe"
    start = 2026-12-01T02:00:00Z
    end = 2026-12-01T04:00:00Z

A bad option or file is one line on stderr naming it, and exit status 2.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from recoup.cli._app import app
from recoup.cli._scenarios import read_scenario_file
from recoup.errors import InvalidInput

log = logging.getLogger("recoup.gateway")

DEFAULT_PORT = 8090


@app.command("gateway")
def gateway_command(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = DEFAULT_PORT,
    seed: Annotated[int, typer.Option(help="Seed of charge ids and probabilistic declines.")] = 0,
    scenarios: Annotated[
        Path | None, typer.Option(help="TOML file of the world, card scenarios and faults.")
    ] = None,
) -> None:
    """Serve a simulated payment gateway over HTTP until SIGTERM/SIGINT."""
    import uvicorn

    from recoup.payments.gateway import SimulatedGateway
    from recoup.payments.server import create_gateway_app
    from recoup.timekeeping.clock import SystemClock

    if not host or host != host.strip():
        raise InvalidInput("--host", host, "expected an address such as 127.0.0.1")
    loaded = read_scenario_file(scenarios)[1] if scenarios is not None else None
    gateway = SimulatedGateway(SystemClock(), seed=seed, world=loaded.world if loaded else None)
    if loaded is not None:
        for fingerprint, scenario in loaded.cards.items():
            gateway.add_card(fingerprint, scenario)
        for fault in loaded.faults:
            gateway.inject(fault)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    server = uvicorn.Server(
        uvicorn.Config(create_gateway_app(gateway), host=host, port=port, log_level="info")
    )
    log.info(
        "simulated gateway on http://%s:%d (seed %d); world %s",
        host,
        port,
        seed,
        gateway.world.name,
    )
    server.run()  # returns on SIGTERM/SIGINT
