"""The figures over seeds, and the table.

Per world and policy: the recovery rate (recovered invoices over all failed invoices, hard
declines included) as the mean over seeds with a 95 % t interval; its difference from the
static default, paired by seed (the draws are common, so the pairing is tight); attempts per
recovered invoice (all seeds pooled); and regret over time, the oracle's expected recoveries
minus the policy's per failed invoice, in points, by week of the failure (averaged over
seeds): a learner's regret should shrink week by week.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.learning.simulate import RunResult

BASELINE = "static default"
ORACLE = "oracle"
Z_975 = 1.959964


def t_975(df: int) -> float:
    """Student's t 97.5 % quantile (Cornish–Fisher to the second order: within 0.2 % from 5
    degrees of freedom on)."""
    z = Z_975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True, kw_only=True)
class Interval:
    mean: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Interval:
        mean = statistics.fmean(values)
        if len(values) < 2:
            return cls(mean=mean, low=mean, high=mean)
        half = t_975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
        return cls(mean=mean, low=mean - half, high=mean + half)

    def points(self) -> str:
        return f"{100 * self.mean:5.1f} [{100 * self.low:4.1f}, {100 * self.high:4.1f}]"

    def signed_points(self) -> str:
        return f"{100 * self.mean:+5.1f} [{100 * self.low:+4.1f}, {100 * self.high:+4.1f}]"


@dataclass(frozen=True, kw_only=True)
class Row:
    world: str
    policy: str
    rate: Interval
    versus_static: Interval
    attempts_per_recovered: float
    regret_by_week: tuple[float, ...]  # points per failed invoice

    def as_json(self) -> dict[str, Any]:
        return {
            "world": self.world,
            "policy": self.policy,
            "recovery_rate": vars(self.rate),
            "versus_static_default": vars(self.versus_static),
            "attempts_per_recovered": self.attempts_per_recovered,
            "regret_by_week_points": list(self.regret_by_week),
        }


def _regret_by_week(runs: Sequence[RunResult], oracle: Sequence[RunResult]) -> tuple[float, ...]:
    weeks = max((w for run in oracle for w in run.week_of.values()), default=0) + 1
    per_week: list[list[float]] = [[] for _ in range(weeks)]
    for run, best in zip(runs, oracle, strict=True):
        gaps: dict[int, list[float]] = defaultdict(list)
        for invoice, week in best.week_of.items():
            gaps[week].append(best.expected_by_invoice[invoice] - run.expected_by_invoice[invoice])
        for week, values in gaps.items():
            per_week[week].append(statistics.fmean(values))
    return tuple(100 * statistics.fmean(v) if v else 0.0 for v in per_week)


def rows(results: Mapping[str, Mapping[str, Sequence[RunResult]]]) -> list[Row]:
    """`results[world][policy]` holds one `RunResult` per seed, the seeds in the same order."""
    found: list[Row] = []
    for world, by_policy in results.items():
        baseline = by_policy.get(BASELINE)
        oracle = by_policy.get(ORACLE)
        for policy, runs in by_policy.items():
            rates = [r.rate for r in runs]
            paired = (
                [r.rate - b.rate for r, b in zip(runs, baseline, strict=True)]
                if baseline is not None
                else [0.0]
            )
            recovered = sum(r.recovered for r in runs)
            found.append(
                Row(
                    world=world,
                    policy=policy,
                    rate=Interval.of(rates),
                    versus_static=Interval.of(paired),
                    attempts_per_recovered=(
                        sum(r.attempts for r in runs) / recovered if recovered else math.inf
                    ),
                    regret_by_week=_regret_by_week(runs, oracle) if oracle is not None else (),
                )
            )
    return found


def table(found: Sequence[Row], *, seeds: int, invoices: int, seconds: float) -> str:
    """The rows as a plain-text table (Markdown, so it pastes into a note as it is)."""
    weeks = max((len(r.regret_by_week) for r in found), default=0)
    head = (
        "| world | policy | recovered % [95% CI] | vs static, pts [95% CI] | "
        "attempts / recovered | regret vs oracle by week of failure, pts |"
    )
    lines = [
        f"{seeds} seeds × {invoices:,} failed invoices per seed, {seconds:.0f} s",
        "",
        head,
        "|---|---|---|---|---|---|",
    ]
    for row in found:
        regret = " ".join(f"{x:4.1f}" for x in row.regret_by_week) if weeks else "–"
        lines.append(
            f"| {row.world} | {row.policy} | {row.rate.points()} | "
            f"{row.versus_static.signed_points()} | {row.attempts_per_recovered:.2f} | {regret} |"
        )
    return "\n".join(lines)


__all__ = ["BASELINE", "ORACLE", "Interval", "Row", "rows", "t_975", "table"]
