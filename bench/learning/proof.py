"""The proof's own targets (issue 20): A/A false positives, the uplift interval's coverage, and
the off-policy estimate's, over runs of the learning benchmark.

    .venv/bin/python -m bench.learning.proof [--aa-runs 100] [--coverage-runs 20]
        [--worlds calibrated,night-owl] [--size 1000] [--months 2] [--bench-json FILE]

`--bench-json` reads the adaptive policy's targets off a `python -m bench.learning --json`
file (its gain over the static default once warmed up, against the oracle's).

- **A/A**: each run is one seed's failures, everyone on the static default, split by the sticky
  holdout (10%, a holdout name per run); a false positive is a run whose 95% interval of the
  difference (`recoup.analytics.uplift.two_proportion_difference`) excludes 0.
- **Coverage**: each run is one seed's failures under the adaptive policy with a 10% holdout
  on the static default. The true effect of the run is the mean over all its invoices of the
  world's expected recovery under the adaptive planner's plan minus under the static plan
  (the proof reads the world; the policy never does). Covered when the 95% interval of
  treatment − holdout holds it.
- **Off-policy**: from the treatment arm's log alone, the static default's recovery estimated
  by self-normalised inverse propensity (`uplift.snips`: an invoice counts when every try it
  made was at the static slot, weighted by 1 / the product of those decisions' propensities);
  covered when its interval holds the static plan's expected recovery over all invoices.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.learning.adaptive import AdaptiveTiming, Planned, bench_policy
from bench.learning.policies import ObservedAttempt, PlannedTry, Static, static_plan
from bench.learning.population import FailureContext, population
from bench.learning.simulate import simulate
from recoup.analytics.uplift import LoggedInvoice, in_holdout, snips, two_proportion_difference
from recoup.dunning import preset
from recoup.payments.world import TryHistory, World, packaged_world, success_probability
from recoup.timekeeping.zones import to_local

SHARE = 0.10


class _Recording(Static):
    """The static default, remembering which invoices it recovered."""

    def __init__(self) -> None:
        super().__init__("static default", preset("business-days"))
        self.recovered: set[str] = set()

    def observe(self, learner_state: Any, attempt: ObservedAttempt) -> None:
        if attempt.succeeded:
            self.recovered.add(attempt.failure.invoice)
        return None


def _arms(
    failures: Sequence[FailureContext], recovered: set[str], held: set[str]
) -> tuple[int, int, int, int]:
    treated = [f.invoice for f in failures if f.invoice not in held]
    holdout = [f.invoice for f in failures if f.invoice in held]
    return (
        sum(i in recovered for i in treated),
        len(treated),
        sum(i in recovered for i in holdout),
        len(holdout),
    )


def aa_false_positives(runs: int, *, size: int, months: int, world: World) -> tuple[int, int]:
    """(false positives, runs) of the A/A runs (module docstring)."""
    false = 0
    for seed in range(runs):
        failures = population(seed, size=size, months=months)
        policy = _Recording()
        simulate(seed, world, policy, failures)
        name = f"aa-{seed}"
        held = {
            f.invoice for f in failures if in_holdout("bench", f.customer, share=SHARE, name=name)
        }
        false += two_proportion_difference(*_arms(failures, policy.recovered, held)).significant
    return false, runs


def _expected(world: World, failure: FailureContext, instants: Sequence[Any]) -> float:
    miss = 1.0
    for k, at in enumerate(instants):
        local = to_local(at, failure.failure.timezone)
        history = TryHistory(first_failed_at=failure.failed_at, retries_before=k)
        miss *= 1.0 - success_probability(world, failure.segment, local, history)
    return 1.0 - miss


@dataclass(frozen=True, kw_only=True)
class CoverageRun:
    seed: int
    true_effect: float
    low: float
    high: float
    static_value: float
    snips_low: float | None
    snips_high: float | None

    @property
    def covered(self) -> bool:
        return self.low <= self.true_effect <= self.high

    @property
    def snips_covered(self) -> bool:
        return (
            self.snips_low is not None
            and self.snips_high is not None
            and self.snips_low <= self.static_value <= self.snips_high
        )


def _logged(
    failures: Sequence[FailureContext], tries: dict[str, list[PlannedTry]], policy: AdaptiveTiming
) -> list[LoggedInvoice]:
    """The treatment arm's invoices as the off-policy estimate reads them, for the static
    default as the candidate: (logged propensity, 1 if the try was at the static slot else 0)."""
    logged: list[LoggedInvoice] = []
    for f in failures:
        if f.invoice in policy.held:
            continue
        decisions = []
        for t in tries.get(f.invoice, []):
            planned = t.decision
            assert isinstance(planned, Planned) and planned.choice is not None
            decisions.append((planned.choice.propensity, 1.0 if planned.choice.static else 0.0))
        logged.append(
            LoggedInvoice(recovered=f.invoice in policy.recovered, decisions=tuple(decisions))
        )
    return logged


class _Logging(AdaptiveTiming):
    """The adaptive policy, keeping the tries it made (the log the runtime would keep)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(bench_policy(), **kwargs)
        self.made: dict[str, list[PlannedTry]] = {}

    def observe(self, learner_state: Any, attempt: ObservedAttempt) -> Any:
        self.made.setdefault(attempt.failure.invoice, []).append(attempt.planned)
        return super().observe(learner_state, attempt)


def coverage_run(seed: int, *, size: int, months: int, world: World) -> CoverageRun:
    failures = population(seed, size=size, months=months)
    policy = _Logging(holdout_share=SHARE, holdout_name=f"cover-{seed}")
    simulate(seed, world, policy, failures)
    static = preset("business-days")
    effects, static_values = [], []
    for f in failures:
        adaptive = _expected(world, f, [t.at for t in policy.counterfactual[f.invoice]])
        fixed = _expected(world, f, [a.at for a in static_plan(static, f.failure)])
        effects.append(adaptive - fixed)
        static_values.append(fixed)
    d = two_proportion_difference(*_arms(failures, policy.recovered, policy.held))
    estimate = snips(_logged(failures, policy.made, policy))
    return CoverageRun(
        seed=seed,
        true_effect=statistics.fmean(effects),
        low=d.low,
        high=d.high,
        static_value=statistics.fmean(static_values),
        snips_low=estimate.low if estimate else None,
        snips_high=estimate.high if estimate else None,
    )


WARM_FROM_WEEK = 4  # the second month of the default two: the learner has a month of answers


def targets(rows: Sequence[dict[str, Any]], *, warm_from: int = WARM_FROM_WEEK) -> list[str]:
    """The adaptive policy's targets read from `python -m bench.learning --json` rows: its gain
    over the static default once warmed up (the weeks of failure from `warm_from` on: static's
    regret less adaptive's, both against the oracle's expected recoveries), and the oracle's."""
    lines = []
    by = {(r["world"], r["policy"]): r for r in rows}
    for world in sorted({r["world"] for r in rows}):
        static, adaptive = by.get((world, "static default")), by.get((world, "adaptive"))
        if static is None or adaptive is None:
            continue
        s_weeks = static["regret_by_week_points"][warm_from:]
        a_weeks = adaptive["regret_by_week_points"][warm_from:]
        gain = statistics.fmean(s - a for s, a in zip(s_weeks, a_weeks, strict=True))
        oracle = statistics.fmean(s_weeks)
        lines.append(
            f"{world}: adaptive {100 * adaptive['versus_static_default']['mean']:+.1f} pts over "
            f"all weeks; once warmed up (weeks {warm_from}+) {gain:+.1f} pts against the "
            f"oracle's {oracle:+.1f} ({gain / oracle:.0%} of its gain)"
            if oracle > 0.05
            else f"{world}: adaptive {100 * adaptive['versus_static_default']['mean']:+.1f} pts "
            f"over all weeks; once warmed up {gain:+.1f} pts (the oracle gains nothing here)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.learning.proof", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--aa-runs", type=int, default=100)
    parser.add_argument("--coverage-runs", type=int, default=20)
    parser.add_argument("--worlds", default="calibrated,night-owl")
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--months", type=int, default=2)
    parser.add_argument(
        "--bench-json", type=Path, default=None, help="read the targets off this benchmark JSON"
    )
    args = parser.parse_args(argv)
    if args.bench_json is not None:
        print("\n".join(targets(json.loads(args.bench_json.read_text("utf-8")))))
        return 0
    worlds = [packaged_world(w.strip()) for w in args.worlds.split(",") if w.strip()]
    if args.aa_runs:
        false, runs = aa_false_positives(
            args.aa_runs, size=args.size, months=args.months, world=worlds[0]
        )
        print(
            f"A/A ({worlds[0].name}): {false} false positives in {runs} runs ({false / runs:.0%})"
        )
    for world in worlds if args.coverage_runs else ():
        found = [
            coverage_run(seed, size=args.size, months=args.months, world=world)
            for seed in range(args.coverage_runs)
        ]
        covered = sum(r.covered for r in found)
        snips_covered = sum(r.snips_covered for r in found)
        effect = statistics.fmean(r.true_effect for r in found)
        width = statistics.fmean(r.high - r.low for r in found)
        print(
            f"coverage ({world.name}): the uplift interval holds the true effect "
            f"({100 * effect:+.1f} pts on average, intervals {100 * width:.1f} pts wide) in "
            f"{covered} of {len(found)} runs ({covered / len(found):.0%}); the off-policy "
            f"estimate of the static default holds its expected value in {snips_covered} of "
            f"{len(found)} ({snips_covered / len(found):.0%})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
