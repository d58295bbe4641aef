"""`build_report`: the recovery report of a set of invoices (definitions in the package
docstring, `recoup.analytics.recovery`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from recoup.analytics.recovery.buckets import Bucket, Tally, make_bucket
from recoup.analytics.recovery.experiment import ExperimentComparison, arms_of, compare
from recoup.analytics.recovery.load import LoadShape, load_shape
from recoup.analytics.recovery.log import cohort, decline_category, failure_category
from recoup.analytics.recovery.merchants import (
    Judging,
    MerchantJudgement,
    MerchantTag,
    ReviewItem,
    judge_merchants,
    review_queue,
)
from recoup.analytics.recovery.spikes import NO_CODE, ChargeEvent, Spike, charge_events, find_spikes
from recoup.analytics.recovery.stats import check_confidence
from recoup.dunning.invoice import AttemptState, Invoice, InvoiceState
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import require_aware
from recoup.timekeeping.zones import to_local

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
CATEGORIES = ("soft", "customer", "hard")
RAN = (AttemptState.SUCCEEDED, AttemptState.FAILED)  # attempts with a charge outcome
NONE_KEY = "(none)"  # the bucket of invoices without a gateway or merchant id


@dataclass(frozen=True, kw_only=True)
class ReportOptions:
    """What a report is judged with. `now` ends the spike and merchant windows and picks the
    tags in force; whether an invoice is still running is its state as given."""

    now: datetime  # explicit (pure): ends the judging windows, picks the tags in force
    min_volume: int = 30  # below: "insufficient data"
    window_days: int = 7  # merchant/gateway spike window
    low_volume_window_days: int = 30
    confidence: float = 0.95
    experiment: tuple[str, str] | None = None  # None: auto when exactly two policies appear
    baseline_windows: int = 4  # a spike's baseline: this many windows before the current one
    spike_min_count: int = 5  # a code seen fewer times in the window never spikes

    def __post_init__(self) -> None:
        require_aware("now", self.now)
        for name in ("min_volume", "window_days", "baseline_windows", "spike_min_count"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidInput(name, value, "expected a whole number ≥ 1")
        if (
            not isinstance(self.low_volume_window_days, int)
            or self.low_volume_window_days < self.window_days
        ):
            raise InvalidInput(
                "low_volume_window_days",
                self.low_volume_window_days,
                f"expected a whole number ≥ window_days ({self.window_days})",
            )
        check_confidence(self.confidence)
        if self.experiment is not None and (
            len(self.experiment) != 2
            or not all(isinstance(p, str) and p for p in self.experiment)
            or self.experiment[0] == self.experiment[1]
        ):
            raise InvalidInput("experiment", self.experiment, "expected two different policy names")


@dataclass(frozen=True, kw_only=True)
class RecoveryReport:
    options: ReportOptions
    invoices: int  # all invoices given
    finished: int  # recovered or exhausted: the denominator of every recovery rate
    running: int  # retrying or awaiting the customer: in no denominator until they end
    running_by_state: dict[str, int]
    stopped: int  # cancelled: dunning stopped without a payment, in no denominator
    overall: Bucket
    recovered_by: dict[str, int]  # attempt | paid_out_of_band
    hard_declines: Bucket  # finished invoices opened by a hard decline, split out
    by_decline_category: list[Bucket]
    by_attempt: list[Bucket]
    cumulative_by_attempt: list[Bucket]
    by_local_hour: list[Bucket]  # soft-declined invoices only
    by_weekday: list[Bucket]  # soft-declined invoices only
    timing_excluded_attempts: int  # ran on invoices opened by a hard or customer decline
    by_decline_code: list[Bucket]
    by_gateway: list[Bucket]
    by_merchant: list[Bucket]
    by_cohort: list[Bucket]
    merchants: list[MerchantJudgement]
    spikes: list[Spike]
    review_queue: list[ReviewItem]
    suppressed: list[ReviewItem]
    load: LoadShape
    double_charges: int
    experiment: ExperimentComparison | None = None


def build_report(
    invoices: Sequence[Invoice],
    *,
    options: ReportOptions,
    tags: Sequence[MerchantTag] = (),
    double_charges: int = 0,
) -> RecoveryReport:
    """The recovery report of `invoices` (pure: `options.now` stands for the clock)."""
    if not isinstance(double_charges, int) or double_charges < 0:
        raise InvalidInput("double_charges", double_charges, "expected a whole number ≥ 0")
    o = options
    finished = [i for i in invoices if i.state.is_judged]
    running = Counter(i.state.value for i in invoices if not i.state.is_final)
    recovered = [i for i in finished if i.state is InvoiceState.RECOVERED]

    def bucket(key: str, hits: int, count: int, category: str | None = None) -> Bucket:
        return make_bucket(
            key, hits, count, min_volume=o.min_volume, confidence=o.confidence, category=category
        )

    def buckets(tally: Tally[str], keys: list[str] | None = None) -> list[Bucket]:
        return tally.buckets(min_volume=o.min_volume, confidence=o.confidence, keys=keys)

    categories: dict[str, str] = {}
    by_category: Tally[str] = Tally()
    by_code: Tally[str] = Tally()
    by_gateway: Tally[str] = Tally()
    by_merchant: Tally[str] = Tally()
    by_cohort: Tally[str] = Tally()
    by_attempt: Tally[int] = Tally()
    by_hour: Tally[int] = Tally()
    by_weekday: Tally[int] = Tally()
    recovered_at: Counter[int] = Counter()
    excluded = 0
    for invoice in finished:
        won = invoice.state is InvoiceState.RECOVERED
        category = failure_category(invoice)
        code = (invoice.decline_code or "").strip().lower() or NO_CODE
        # The code's own class labels its bucket (an advice code may make one invoice stricter).
        categories[code] = decline_category(None if code == NO_CODE else code, None) or "soft"
        by_category.add(category, won)
        by_code.add(code, won)
        by_gateway.add(invoice.gateway or NONE_KEY, won)
        by_merchant.add(invoice.merchant_id or NONE_KEY, won)
        by_cohort.add(cohort(invoice).isoformat(), won)
        by = invoice.recovered_by or ""
        if won and by.startswith("attempt:") and by.removeprefix("attempt:").isdigit():
            recovered_at[int(by.removeprefix("attempt:"))] += 1
        for a in invoice.attempts:
            if a.state not in RAN:
                continue
            success = a.state is AttemptState.SUCCEEDED
            by_attempt.add(a.attempt, success)
            if category != "soft":
                excluded += 1
                continue
            local = to_local(a.at, invoice.timezone)
            by_hour.add(local.hour, success)
            by_weekday.add(local.weekday(), success)

    attempt_numbers = sorted(set(by_attempt.count) | set(recovered_at))
    cumulative, so_far = [], 0
    for n in attempt_numbers:
        so_far += recovered_at[n]
        cumulative.append(bucket(str(n), so_far, len(finished)))
    judging = Judging(
        now=o.now,
        window_days=o.window_days,
        low_volume_window_days=o.low_volume_window_days,
        baseline_windows=o.baseline_windows,
        min_volume=o.min_volume,
        spike_min_count=o.spike_min_count,
        confidence=o.confidence,
    )
    merchant_events, gateway_events = _events_by(invoices)
    finished_by_merchant: dict[str, list[Invoice]] = defaultdict(list)
    for invoice in finished:
        if invoice.merchant_id:
            finished_by_merchant[invoice.merchant_id].append(invoice)
    merchants = judge_merchants(merchant_events, finished_by_merchant, judging)
    gateway_spikes = [
        spike
        for gateway in sorted(gateway_events)
        for spike in find_spikes(
            gateway_events[gateway],
            dimension="gateway",
            key=gateway,
            end=o.now,
            window_days=o.window_days,
            baseline_windows=o.baseline_windows,
            confidence=o.confidence,
            min_count=o.spike_min_count,
        )
    ]
    queue, suppressed = review_queue(merchants, merchant_events, tags, judging)
    arms = arms_of(invoices, o.experiment)
    return RecoveryReport(
        options=o,
        invoices=len(invoices),
        finished=len(finished),
        running=sum(running.values()),
        running_by_state=dict(sorted(running.items())),
        stopped=sum(1 for i in invoices if i.state is InvoiceState.CANCELLED),
        overall=bucket("overall", len(recovered), len(finished)),
        recovered_by={
            "attempt": sum(recovered_at.values()),
            "paid_out_of_band": len(recovered) - sum(recovered_at.values()),
        },
        hard_declines=bucket(
            "hard", by_category.recovered.get("hard", 0), by_category.count.get("hard", 0), "hard"
        ),
        by_decline_category=[
            bucket(c, by_category.recovered.get(c, 0), by_category.count.get(c, 0), c)
            for c in CATEGORIES
        ],
        by_attempt=by_attempt.buckets(
            min_volume=o.min_volume, confidence=o.confidence, keys=attempt_numbers
        ),
        cumulative_by_attempt=cumulative,
        by_local_hour=by_hour.buckets(
            min_volume=o.min_volume, confidence=o.confidence, keys=list(range(24))
        ),
        by_weekday=by_weekday.buckets(
            min_volume=o.min_volume,
            confidence=o.confidence,
            keys=list(range(7)),
            name=lambda d: WEEKDAYS[d],
        ),
        timing_excluded_attempts=excluded,
        by_decline_code=by_code.buckets(
            min_volume=o.min_volume, confidence=o.confidence, category=categories.get
        ),
        by_gateway=buckets(by_gateway),
        by_merchant=buckets(by_merchant),
        by_cohort=buckets(by_cohort),
        merchants=merchants,
        spikes=gateway_spikes + [s for m in merchants for s in m.spikes],
        review_queue=queue,
        suppressed=suppressed,
        load=load_shape(invoices),
        double_charges=double_charges,
        experiment=(
            compare(invoices, arms, min_volume=o.min_volume, confidence=o.confidence)
            if arms
            else None
        ),
    )


def _events_by(
    invoices: Sequence[Invoice],
) -> tuple[dict[str, list[ChargeEvent]], dict[str, list[ChargeEvent]]]:
    """Every invoice's charge outcomes, by merchant id and by gateway."""
    merchants: dict[str, list[ChargeEvent]] = defaultdict(list)
    gateways: dict[str, list[ChargeEvent]] = defaultdict(list)
    for invoice in invoices:
        events = charge_events(invoice)
        if invoice.merchant_id:
            merchants[invoice.merchant_id].extend(events)
        if invoice.gateway:
            gateways[invoice.gateway].extend(events)
    return dict(merchants), dict(gateways)


__all__ = ["CATEGORIES", "WEEKDAYS", "RecoveryReport", "ReportOptions", "build_report"]
