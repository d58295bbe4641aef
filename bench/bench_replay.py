"""Benchmark: the bulk dry-run replay against a per-invoice loop over `plan_retries`.

    .venv/bin/python bench/bench_replay.py [--rows 1000000] [--loop-rows 20000] [--policy NAME]

Generates synthetic failures (a month of them, in 24 zones, mostly soft declines), times
parsing + planning + the summary for all of them, times the straightforward loop on a subset,
checks that the replay equals the loop on that subset row for row, and prints both rates and
their ratio. The issue's target: 1,000,000 failures in under 10 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime

import numpy as np

from recoup.analytics.replay import (
    KIND_NAMES,
    attempts_of,
    read_failures,
    replay_failures,
    summarize,
)
from recoup.dunning import Retry, decision_kind, plan_retries, preset

ZONES = [
    ("America/New_York", "US"),
    ("America/Chicago", "US"),
    ("America/Denver", "US"),
    ("America/Los_Angeles", "US"),
    ("America/Toronto", "CA"),
    ("America/Sao_Paulo", "BR"),
    ("America/Mexico_City", "MX"),
    ("Europe/London", "GB"),
    ("Europe/Paris", "FR"),
    ("Europe/Berlin", "DE"),
    ("Europe/Madrid", "ES"),
    ("Europe/Warsaw", "PL"),
    ("Africa/Johannesburg", "ZA"),
    ("Asia/Jerusalem", "IL"),
    ("Asia/Dubai", "AE"),
    ("Asia/Kolkata", "IN"),
    ("Asia/Singapore", "SG"),
    ("Asia/Tokyo", "JP"),
    ("Australia/Sydney", "AU"),
    ("Australia/Lord_Howe", "AU"),
    ("Pacific/Auckland", "NZ"),
    ("Pacific/Chatham", "NZ"),
    ("Pacific/Kiritimati", ""),
    ("UTC", ""),
]
# (decline code, weight): mostly soft, as Recurly reports (>90% generic, NSF, temporary).
DECLINES = [
    ("insufficient_funds", 45),
    ("do_not_honor", 15),
    ("generic_decline", 15),
    ("processing_error", 5),
    ("51", 5),
    ("expired_card", 5),
    ("lost_card", 3),
    ("authentication_required", 3),
    ("some_new_code", 2),
    ("", 2),
]
ADVICE = [("", 90), ("25", 4), ("24", 3), ("do_not_try_again", 2), ("try_again_later", 1)]
MONTH_START = int(datetime(2026, 6, 1, tzinfo=UTC).timestamp())
MONTH = 30 * 86_400  # seconds


def synthetic_csv(rows: int, seed: int) -> str:
    """A failures CSV of `rows` rows spread over June 2026 (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    zone_idx = rng.integers(0, len(ZONES), rows)
    seconds = MONTH_START + rng.integers(0, MONTH, rows)
    stamps = np.datetime_as_string(seconds.astype("datetime64[s]"), unit="s").tolist()

    def pick(table: list[tuple[str, int]]) -> list[str]:
        names, weights = zip(*table, strict=True)
        p = np.array(weights, dtype=float) / sum(weights)
        return [names[i] for i in rng.choice(len(names), rows, p=p).tolist()]

    declines, advice = pick(DECLINES), pick(ADVICE)
    lines = ["invoice_id,failed_at,timezone,country,decline_code,advice_code,gateway,merchant_id"]
    lines += [
        f"inv_{i:07d},{stamps[i]}Z,{ZONES[z][0]},{ZONES[z][1]},{declines[i]},{advice[i]},stripe,acct_1"
        for i, z in enumerate(zone_idx.tolist())
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--loop-rows", type=int, default=20_000)
    parser.add_argument("--policy", default="business-days")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    policy = preset(args.policy)

    print(f"generating {args.rows:,} synthetic failures…", flush=True)
    text = synthetic_csv(args.rows, args.seed)

    started = time.perf_counter()
    rows, bad = read_failures(text)
    parsed = time.perf_counter()
    result = replay_failures(rows, policy)
    planned = time.perf_counter()
    summary = summarize(result, compare_nightly=True)
    finished = time.perf_counter()
    bulk_seconds = finished - started
    bulk_rate = len(rows) / bulk_seconds
    assert not bad, bad[:3]

    subset = np.linspace(0, len(rows) - 1, min(args.loop_rows, len(rows))).astype(int).tolist()
    failures = [rows.failure(i) for i in subset]
    loop_started = time.perf_counter()
    decisions = [plan_retries(f, policy) for f in failures]
    loop_seconds = time.perf_counter() - loop_started
    loop_rate = len(subset) / loop_seconds

    mismatches = 0
    for i, decision in zip(subset, decisions, strict=True):
        expected = [
            (a.attempt, int(a.at.timestamp()), int(a.local.utcoffset().total_seconds()))  # type: ignore[union-attr]
            for a in (decision.attempts if isinstance(decision, Retry) else ())
        ]
        if (
            KIND_NAMES[result.kind[i]] != decision_kind(decision)
            or attempts_of(result, i) != expected
        ):
            mismatches += 1

    print(f"policy            {policy.name}")
    print(f"failures          {len(rows):,} ({summary['attempts']:,} attempts planned)")
    print(
        f"bulk replay       {bulk_seconds:.2f} s  (parse {parsed - started:.2f} s, plan "
        f"{planned - parsed:.2f} s, summary {finished - planned:.2f} s)"
    )
    print(f"bulk rate         {bulk_rate:,.0f} failures/s")
    print(
        f"per-invoice loop  {loop_rate:,.0f} failures/s  "
        f"({len(subset):,} failures in {loop_seconds:.2f} s)"
    )
    print(f"ratio             {bulk_rate / loop_rate:.1f}× faster")
    print(f"1M failures in    {1_000_000 / bulk_rate:.2f} s (target < 10 s)")
    print(
        f"replay == plan    {len(subset) - mismatches:,}/{len(subset):,} sampled invoices identical"
    )
    print(
        f"busiest minute    {summary['peak_per_minute']:,} attempts "
        f"(nightly 00:00 UTC batch: {summary['nightly']['peak_per_minute']:,})"
    )
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
