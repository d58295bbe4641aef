"""The learning benchmark: failed invoices retried under each timing policy in each world,
over seeds; one table.

    .venv/bin/python -m bench.learning [--seeds 20] [--size 1000] [--months 2]
        [--worlds calibrated,night-owl,flat] [--policies NAME,…] [--json FILE]

`--size` failed invoices a month (the demo's customers, drawn again each month), `--months`
months of failures (a learner warms up over them). Policies: those of
`bench.learning.policies.FACTORIES` (static default, payday-aware, nightly batch, oracle, and
any registered there). Worlds: the packaged ones (`recoup.payments.world.WORLDS`) or paths of
world TOML files. Pure and single-threaded: the planner, the world and seeded draws, no
scheduler, no HTTP.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import bench.learning.adaptive  # noqa: F401  (registers "adaptive" in FACTORIES)
from bench.learning.policies import FACTORIES
from bench.learning.population import population
from bench.learning.report import rows, table
from bench.learning.simulate import RunResult, simulate
from recoup.payments.world import WORLDS, World, packaged_world, parse_world

DEFAULT_WORLDS = ("calibrated", "night-owl", "flat")


def _world(name: str) -> World:
    if name in WORLDS:
        return packaged_world(name)
    path = Path(name)
    return parse_world(path.read_text("utf-8"), name=path.stem)


def run(
    *, seeds: int, size: int, months: int, worlds: list[str], policies: list[str]
) -> dict[str, dict[str, list[RunResult]]]:
    """`results[world][policy]`: one `RunResult` per seed."""
    loaded = [_world(w) for w in worlds]
    results: dict[str, dict[str, list[RunResult]]] = {
        w.name: {p: [] for p in policies} for w in loaded
    }
    for seed in range(seeds):
        failures = population(seed, size=size, months=months)
        for world in loaded:
            for name in policies:
                policy = FACTORIES[name](world)  # a fresh learner per seed and world
                results[world.name][name].append(simulate(seed, world, policy, failures))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.learning", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--size", type=int, default=1000, help="failed invoices a month")
    parser.add_argument("--months", type=int, default=2)
    parser.add_argument("--worlds", default=",".join(DEFAULT_WORLDS))
    parser.add_argument("--policies", default=",".join(FACTORIES))
    parser.add_argument("--json", type=Path, default=None, help="write the rows here too")
    args = parser.parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in FACTORIES]
    if unknown or args.seeds < 1 or args.size < 1 or args.months < 1:
        parser.error(
            f"unknown policies {unknown} (known: {list(FACTORIES)})"
            if unknown
            else "sizes must be ≥ 1"
        )
    began = time.perf_counter()
    results = run(
        seeds=args.seeds,
        size=args.size,
        months=args.months,
        worlds=[w.strip() for w in args.worlds.split(",") if w.strip()],
        policies=policies,
    )
    found = rows(results)
    elapsed = time.perf_counter() - began
    print(table(found, seeds=args.seeds, invoices=args.size * args.months, seconds=elapsed))
    if args.json is not None:
        args.json.write_text(json.dumps([r.as_json() for r in found], indent=2) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
