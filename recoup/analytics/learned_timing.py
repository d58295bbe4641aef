"""What an adaptive policy learned, read from its invoices' stored decisions
(`dunning.attempt_timing`): how its decisions split by arm, the share moved off the static
slot, the slots it chose most per context, and the recovery of the treated customers beside the
holdout's (the static schedule, same run), with Newcombe's interval.

    learned_timing(invoices) → LearnedTiming | None   (None: no decision recorded)

- **Decisions**: every attempt with a timing; `cold_start` counts the adaptive decisions made
  before the log had enough answers (propensity 1 and the static slot, by the learner's rule).
- **Top slots per context**: the context is the invoice's decline code; its slots are those
  the adaptive arm chose off the static slot, most chosen first (at most `top` per context,
  the contexts with the most decisions first), each with its mean estimated success rate and
  the static slot's.
- **Uplift**: an invoice is treated when its first decision's arm is `adaptive`, held out when
  `holdout`; only judged invoices (recovered or exhausted) count.

Pure: the invoices are an argument.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from recoup.analytics.uplift import Difference, two_proportion_difference
from recoup.dunning.attempt_timing import AttemptTiming
from recoup.dunning.invoice import Invoice, InvoiceState


@dataclass(frozen=True, kw_only=True)
class LearnedSlot:
    context: str  # the decline code
    slot: str
    decisions: int
    estimate: float | None  # the mean estimated success rate of the decisions
    static_estimate: float | None


@dataclass(frozen=True, kw_only=True)
class LearnedTiming:
    decisions: int
    by_arm: dict[str, int]
    adaptive: int
    moved: int  # adaptive decisions off the static slot
    explored: int
    cold_start: int
    top_slots: tuple[LearnedSlot, ...]
    treated: tuple[int, int]  # (recovered, judged) of the treated invoices
    held_out: tuple[int, int]  # the same of the holdout
    uplift: Difference | None  # treated − holdout (None while an arm has no judged invoice)

    @property
    def moved_share(self) -> float:
        return self.moved / self.adaptive if self.adaptive else 0.0

    def as_json(self) -> dict[str, Any]:
        d = self.uplift
        return {
            "decisions": self.decisions,
            "by_arm": self.by_arm,
            "adaptive": self.adaptive,
            "moved": self.moved,
            "moved_share": round(self.moved_share, 4),
            "explored": self.explored,
            "cold_start": self.cold_start,
            "top_slots": [
                {
                    "context": s.context,
                    "slot": s.slot,
                    "decisions": s.decisions,
                    "estimate": None if s.estimate is None else round(s.estimate, 4),
                    "static_estimate": (
                        None if s.static_estimate is None else round(s.static_estimate, 4)
                    ),
                }
                for s in self.top_slots
            ],
            "treated": {"recovered": self.treated[0], "judged": self.treated[1]},
            "holdout": {"recovered": self.held_out[0], "judged": self.held_out[1]},
            "uplift": None
            if d is None
            else {
                "difference": round(d.difference, 4),
                "low": round(d.low, 4),
                "high": round(d.high, 4),
                "confidence": d.confidence,
            },
        }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _figures(timings: Sequence[AttemptTiming], name: str) -> list[float]:
    found = (_number(t.figures.get(name)) for t in timings)
    return [value for value in found if value is not None]


def _top_slots(
    chosen: Iterable[tuple[str, AttemptTiming]], *, contexts: int, top: int
) -> tuple[LearnedSlot, ...]:
    by_context: defaultdict[str, list[AttemptTiming]] = defaultdict(list)
    for context, timing in chosen:
        by_context[context].append(timing)
    ranked = sorted(by_context.items(), key=lambda item: (-len(item[1]), item[0]))[:contexts]
    found: list[LearnedSlot] = []
    for context, timings in ranked:
        counts = Counter(t.slot for t in timings)
        for slot, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:top]:
            mine = [t for t in timings if t.slot == slot]
            found.append(
                LearnedSlot(
                    context=context,
                    slot=slot,
                    decisions=n,
                    estimate=_mean(_figures(mine, "estimate")),
                    static_estimate=_mean(_figures(mine, "static_estimate")),
                )
            )
    return tuple(found)


def learned_timing(
    invoices: Iterable[Invoice], *, contexts: int = 3, top: int = 3
) -> LearnedTiming | None:
    """The summary of the module docstring (None: no invoice has a recorded decision)."""
    timings: list[tuple[Invoice, AttemptTiming]] = []
    arms: dict[str, tuple[int, int]] = {"adaptive": (0, 0), "holdout": (0, 0)}
    for invoice in invoices:
        mine = [a.timing for a in invoice.attempts if a.timing is not None]
        timings += [(invoice, t) for t in mine]
        if mine and mine[0].arm in arms and invoice.state.is_judged:
            won, judged = arms[mine[0].arm]
            arms[mine[0].arm] = (won + (invoice.state is InvoiceState.RECOVERED), judged + 1)
    if not timings:
        return None
    adaptive = [(i, t) for i, t in timings if t.arm == "adaptive"]
    moved = [(i, t) for i, t in adaptive if t.moved]
    treated, held = arms["adaptive"], arms["holdout"]
    uplift = (
        two_proportion_difference(treated[0], treated[1], held[0], held[1])
        if treated[1] and held[1]
        else None
    )
    return LearnedTiming(
        decisions=len(timings),
        by_arm=dict(sorted(Counter(t.arm for _, t in timings).items())),
        adaptive=len(adaptive),
        moved=len(moved),
        explored=sum(1 for _, t in adaptive if t.figures.get("explored") is True),
        cold_start=sum(1 for _, t in adaptive if "cold start" in t.explanation),
        top_slots=_top_slots(
            ((i.decline_code or "none", t) for i, t in moved), contexts=contexts, top=top
        ),
        treated=treated,
        held_out=held,
        uplift=uplift,
    )


__all__ = ["LearnedSlot", "LearnedTiming", "learned_timing"]
