"""What `recoup demo --policy adaptive` prints of its learning: the decisions by arm, the share
moved off the static slot, the slots it chose most per decline code, and the treated
customers' recovery beside the holdout's (the static schedule, same run, same world)
(`analytics.learned_timing`). Nothing for a static policy: the default demo is unchanged."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from recoup.analytics.learned_timing import LearnedTiming, learned_timing
from recoup.demo.run import DemoResult


def learned(result: DemoResult) -> LearnedTiming | None:
    return learned_timing(result.invoices)


def learning_json(result: DemoResult) -> dict[str, Any]:
    """`{"learning": …}` for the `--json` object of an adaptive run, else `{}`."""
    found = learned(result)
    return {} if found is None else {"learning": found.as_json()}


def _rate(recovered: int, judged: int) -> str:
    return f"{recovered:,} of {judged:,} ({recovered / judged:.1%})" if judged else "none judged"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def print_learning(result: DemoResult, console: Console) -> None:
    found = learned(result)
    if found is None:
        return
    arms = ", ".join(f"{arm} {n:,}" for arm, n in found.by_arm.items())
    console.print("\n[bold]What the adaptive policy learned[/bold]", highlight=False)
    console.print(f"  {found.decisions:,} timing decisions: {arms}", markup=False)
    console.print(
        f"  moved off the static slot: {found.moved:,} of {found.adaptive:,} adaptive decisions "
        f"({found.moved_share:.1%}); {found.explored:,} explored; {found.cold_start:,} on the "
        "static slot while the log was too short (cold start)",
        markup=False,
    )
    if found.top_slots:
        table = Table(title="Slots it chose most, by decline code", title_justify="left")
        for name in ("decline code", "slot", "decisions", "estimate", "static slot's"):
            table.add_column(name, justify="left" if name in ("decline code", "slot") else "right")
        for s in found.top_slots:
            table.add_row(
                s.context,
                s.slot,
                f"{s.decisions:,}",
                _percent(s.estimate),
                _percent(s.static_estimate),
            )
        console.print(table)
    console.print(
        f"  learned timing: {_rate(*found.treated)} recovered; the holdout on the static "
        f"schedule: {_rate(*found.held_out)}",
        markup=False,
    )
    d = found.uplift
    if d is not None:
        console.print(
            f"  difference {100 * d.difference:+.1f} points, 95% interval "
            f"[{100 * d.low:+.1f}, {100 * d.high:+.1f}] (Newcombe; a small holdout gives a "
            "wide interval in one month)",
            markup=False,
        )


__all__ = ["learned", "learning_json", "print_learning"]
