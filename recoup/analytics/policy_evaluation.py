"""`recoup report --evaluate POLICY`: a candidate policy's recovery estimated from the logged
decisions of an adaptive policy, before anyone turns it on.

    evaluate_policy(invoices, candidate, state=…, seed=…) → Evaluation

- **The log**: the judged invoices (recovered or exhausted) whose first plan recorded timing
  decisions (arm `adaptive` or `holdout`: `dunning.attempt_timing`); of each, the decisions of
  the attempts actually made (answered `succeeded` or `failed`), each with the slot taken and
  its logged propensity.
- **The candidate's probability of a logged slot**: the candidate plans the invoice's failure
  (`learned_planning.plan_failure`: its static schedule, or for an adaptive candidate its
  decisions from the tenant's current learner state and seed, held out of no holdout), and its
  attempt k is read as a slot in the logged decision's band width; the probability is 1 when
  that is the logged slot of attempt k, else 0 (the candidate as one deterministic plan; the
  card's other attempts are not replayed, so its network limits are not). An invoice weighs
  the product over its decisions of candidate ÷ logged (`uplift.snips`).
- **The estimate**: self-normalised inverse propensity with the delta method's interval,
  beside the logged policy's observed recovery (Wilson) on the same invoices.
- **When the log cannot support it** (`supported` False, `reasons` say why): no decision
  logged; no exploration (every logged propensity is 1, so only invoices the candidate plans
  exactly as logged count, and they are not a sample of the rest); too few overlapping
  invoices (fewer than `min_overlap` with a weight above 0, or an effective size below it).

Pure: the invoices, the learner state and the seed are arguments.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from recoup.analytics.recovery.stats import Interval, wilson
from recoup.analytics.uplift import LoggedInvoice, PolicyEstimate, snips
from recoup.dunning.adaptive_counts import LearnerState
from recoup.dunning.adaptive_slots import Slot, slot_of
from recoup.dunning.invoice import AttemptState, Invoice, InvoiceState
from recoup.dunning.learned_planning import Learning, plan_failure, slot_from_figures
from recoup.dunning.outcomes import Retry
from recoup.dunning.planner import Failure
from recoup.dunning.policy import DunningPolicy

MIN_OVERLAP = 30  # invoices the candidate could have produced, for a supported estimate
_ANSWERED = (AttemptState.SUCCEEDED, AttemptState.FAILED)
_EXPLORING = 1 - 1e-9  # a propensity below this is a decision that could have gone otherwise


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    candidate: str
    invoices: int  # judged invoices with logged decisions
    decisions: int
    exploring_decisions: int  # logged with a propensity below 1
    overlapping: int  # invoices the candidate could have produced (weight > 0)
    observed: Interval | None  # the logged policy's recovery on these invoices
    observed_recovered: int
    estimate: PolicyEstimate | None
    supported: bool
    reasons: tuple[str, ...]


def _failure(invoice: Invoice) -> Failure:
    return Failure(
        invoice=invoice.invoice_id,
        failed_at=invoice.failed_at,
        timezone=invoice.timezone,
        country=invoice.country,
        decline_code=invoice.decline_code,
        advice_codes=(invoice.advice_code,) if invoice.advice_code else (),
        card=invoice.card_fingerprint,
        network=invoice.card_network,
        gateway=invoice.gateway,
        merchant_id=invoice.merchant_id,
        amount=invoice.amount,
    )


def _logged(invoice: Invoice) -> list[tuple[int, Slot, float]]:
    """(attempt number, slot, propensity) of the first plan's decisions actually made."""
    found = []
    for a in invoice.attempts:
        t = a.timing
        if t is None or t.arm not in ("adaptive", "holdout") or a.state not in _ANSWERED:
            continue
        slot = slot_from_figures(t.figures.get("slot"))
        if slot is not None:
            found.append((a.attempt, slot, t.propensity))
    return found


def _candidate_slots(
    invoice: Invoice, candidate: DunningPolicy, learning: Learning | None, band: int
) -> dict[int, Slot]:
    decision = plan_failure(_failure(invoice), candidate, learning=learning)
    if not isinstance(decision, Retry):
        return {}
    return {a.attempt: slot_of(a.local, band, invoice.country) for a in decision.attempts}


def evaluate_policy(
    invoices: Iterable[Invoice],
    candidate: DunningPolicy,
    *,
    state: LearnerState,
    seed: int,
    confidence: float = 0.95,
    min_overlap: int = MIN_OVERLAP,
) -> Evaluation:
    """The candidate's estimated recovery (rules in the module docstring)."""
    learning = Learning(state=state, seed=seed) if candidate.adaptive is not None else None
    logged: list[LoggedInvoice] = []
    decisions = exploring = 0
    for invoice in invoices:
        if not invoice.state.is_judged:
            continue
        made = _logged(invoice)
        if not made:
            continue
        band = made[0][1].band_minutes
        slots = _candidate_slots(invoice, candidate, learning, band)
        pairs = tuple(
            (propensity, 1.0 if slots.get(n) == slot else 0.0) for n, slot, propensity in made
        )
        decisions += len(pairs)
        exploring += sum(1 for p, _ in pairs if p < _EXPLORING)
        logged.append(
            LoggedInvoice(recovered=invoice.state is InvoiceState.RECOVERED, decisions=pairs)
        )
    recovered = sum(i.recovered for i in logged)
    observed = wilson(recovered, len(logged), confidence) if logged else None
    overlapping = sum(1 for i in logged if i.weight > 0)
    estimate = snips(logged, confidence=confidence) if logged else None
    reasons: list[str] = []
    if not logged:
        reasons.append(
            "the log holds no timing decision of a judged invoice (a static policy logs none: "
            "turn the adaptive policy on, with exploration, to build one)"
        )
    else:
        if not exploring:
            reasons.append(
                "no exploration: every logged decision had propensity 1, so only the invoices "
                "the candidate would have planned exactly as logged count, and they are not a "
                "sample of the others"
            )
        effective = 0.0 if estimate is None else estimate.effective_invoices
        if overlapping < min_overlap or effective < min_overlap:
            reasons.append(
                f"too few overlapping decisions: {overlapping} of {len(logged)} invoices are "
                f"ones the candidate could have produced (effective size {effective:.0f}; "
                f"{min_overlap} needed)"
            )
    if reasons and exploring == 0 and overlapping == len(logged) and logged:
        reasons = [r for r in reasons if not r.startswith("no exploration")]  # the same plans
    return Evaluation(
        candidate=candidate.name,
        invoices=len(logged),
        decisions=decisions,
        exploring_decisions=exploring,
        overlapping=overlapping,
        observed=observed,
        observed_recovered=recovered,
        estimate=estimate,
        supported=not reasons,
        reasons=tuple(reasons),
    )


__all__ = ["MIN_OVERLAP", "Evaluation", "evaluate_policy"]
