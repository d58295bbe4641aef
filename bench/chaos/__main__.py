"""The chaos run: failed payments retried while workers are killed, database connections
terminated and the gateway is down; every invariant checked at the end.

    .venv/bin/python -m bench.chaos --backend postgres|sqlite [--failures 2000]
        [--duration 60] [--seed 7] [--drain-timeout 120] [--json FILE] [--logs DIR]
        [--dsn postgresql://postgres@127.0.0.1:5432/test | --own-server] [--keep-db]

`--backend` may be given twice (or `all`). Prints the figures and the checks per backend;
exits 1 if any invariant failed on any backend. PostgreSQL runs get a database of their own
on the server of `--dsn`, dropped afterwards; with `--own-server` they get a server of their
own instead (initdb in a temporary directory), which the chaos crashes and starts again once.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from bench.chaos.report import render, to_json
from bench.chaos.run import DEFAULT_POSTGRES_URL, ChaosOptions, ChaosResult, run_chaos


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.chaos", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--backend", action="append", choices=["postgres", "sqlite", "all"])
    parser.add_argument("--failures", type=int, default=2000, help="renewals that fail")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of chaos")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--drain-timeout", type=float, default=120.0)
    parser.add_argument("--outage", type=float, default=3.0, help="seconds the gateway is down")
    parser.add_argument("--json", type=Path, help="write the figures and checks here")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs in this directory")
    parser.add_argument("--dsn", default=DEFAULT_POSTGRES_URL)
    parser.add_argument(
        "--own-server",
        action="store_true",
        help="PostgreSQL: run on a server of the run's own, crashed and restarted mid-run",
    )
    parser.add_argument(
        "--keep-db", action="store_true", help="leave the PostgreSQL database for a look"
    )
    args = parser.parse_args(argv)
    if args.failures < 1 or args.duration <= 0:
        parser.error("--failures and --duration must be positive")
    backends = args.backend or ["sqlite"]
    if "all" in backends:
        backends = ["sqlite", "postgres"]
    logging.getLogger("recoup").setLevel(logging.ERROR)
    results: list[ChaosResult] = []
    for backend in backends:
        options = ChaosOptions(
            backend=backend,
            failures=args.failures,
            duration=args.duration,
            seed=args.seed,
            drain_timeout=args.drain_timeout,
            outage_seconds=args.outage,
            postgres_url=args.dsn,
            own_server=args.own_server and backend == "postgres",
            log_dir=None if args.logs is None else args.logs / backend,
            keep_database=args.keep_db,
        )
        result = run_chaos(options)
        print(render(result), flush=True)
        results.append(result)
    if args.json is not None:
        args.json.write_text(to_json(results) + "\n", "utf-8")
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
