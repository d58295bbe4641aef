"""The chaos run's figures and checks, as text for a terminal."""

from __future__ import annotations

import json
from typing import Any

from bench.chaos.run import ChaosResult


def render(result: ChaosResult) -> str:
    f = result.figures
    rescue = f["rescue"]
    gateway = f["gateway"]
    lines = [
        f"chaos run on {f['backend']}: {f['failures_reported']} failures reported of "
        f"{f['failures_generated']} renewals; chaos {f['chaos_seconds']} s, "
        f"drain {f['drain_seconds']} s, total {f['total_seconds']} s",
        f"  customer events   {_inline(f['customer_events'])}",
        f"  invoices          {_inline(f['invoices_by_state'])}",
        f"  attempts          {_inline(f['attempts_by_state'])}",
        f"  jobs              {_inline(f['jobs_by_state'])}",
        f"  runs              {_inline(f['runs_by_outcome'])}",
        f"  gateway           calls {gateway['calls']}, succeeded {gateway['succeeded']}, "
        f"declined {gateway['declined']}, refused {gateway['refused']}, "
        f"timeouts {gateway['timeouts']}, replays {gateway['replays']}",
        f"  kills             {rescue['kills']} ({rescue['registered_when_killed']} registered,"
        f" {rescue['rescued']} rescued); kill → rescue {_span(rescue['kill_to_rescue_s'])};"
        f" {rescue['lost_runs']} lost runs, kill → last handed back"
        f" {_span(rescue['kill_to_last_lost_run_s'])}",
        f"  pg terminations   {[t['connections'] for t in f['pg_terminations']]} connections",
        f"  db restarts       {f['db_restarts_s']} s away (a server of the run's own)"
        if f["db_restarts_s"]
        else "  db restarts       none (the run does not own its server)",
        f"  gateway outages   {f['gateway_outages_s']} s",
        f"  open at the end   {f['still_open_attempts']} attempts (waiting on their backoff), "
        f"{f['running_jobs_at_end']} jobs running",
        "checks:",
    ]
    for check in result.checks:
        mark = "ok  " if check.passed else ("FAIL" if check.binding else "NOTE")
        lines.append(f"  {mark} {check.name}: {check.figure}")
        lines += [f"         {o}" for o in check.offenders[:5]]
    lines.append("PASSED (every invariant held)" if result.passed else "FAILED")
    return "\n".join(lines)


def _inline(counts: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def _span(summary: dict[str, float | None]) -> str:
    if summary["median"] is None:
        return "n/a"
    return f"median {summary['median']:.2f} s (max {summary['max']:.2f} s)"


def to_json(results: list[ChaosResult]) -> str:
    return json.dumps([r.as_json() for r in results], indent=2, default=str)


__all__ = ["render", "to_json"]
