"""Merchant ids: the window each is judged over, its spikes, its tags, and the review queue.

- A merchant id with at least `min_volume` charge outcomes (see `spikes`) in the last
  `window_days` is judged over that window; one with fewer is **low-volume** and judged over
  the last `low_volume_window_days` instead, its baseline being the windows of that length
  before.
- The **review queue** lists the low-volume merchant ids with a decline-code spike.
- A `MerchantTag` (seasonal, newly onboarded, other; with a note) made at `tagged_at`
  suppresses the merchant's re-flag until **the data contradicts it**: the evidence the tagger
  saw is the merchant's window of the same length ending at `tagged_at`; the tag is contradicted
  when a code spiking now has a current share significantly above its share in that window
  (the current lower Wilson bound above the tag-time upper bound: a new code spiking, or the
  same code much worse), or when that window held no charge outcome at all (the tag vouched for
  nothing). The latest tag made at or before `now` counts; later ones are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from recoup.analytics.recovery.buckets import Bucket, make_bucket
from recoup.analytics.recovery.spikes import (
    ChargeEvent,
    Spike,
    find_spikes,
    share,
    window_counts,
)
from recoup.dunning.invoice import Invoice, InvoiceState
from recoup.errors import InvalidInput
from recoup.timekeeping.instants import require_aware

TAG_KINDS = ("seasonal", "new", "other")


@dataclass(frozen=True, kw_only=True)
class MerchantTag:
    merchant_id: str
    tag: str  # seasonal | new (newly onboarded) | other
    note: str
    tagged_at: datetime

    def __post_init__(self) -> None:
        require_aware("tagged_at", self.tagged_at)
        if self.tag not in TAG_KINDS:
            raise InvalidInput("tag", self.tag, f"expected one of {', '.join(TAG_KINDS)}")
        if not self.merchant_id:
            raise InvalidInput("merchant_id", self.merchant_id, "expected a merchant id")


@dataclass(frozen=True, kw_only=True)
class MerchantJudgement:
    """How one merchant id is judged: the window used, its recovery there, its spikes."""

    merchant_id: str
    window_days: int
    low_volume: bool
    recent_outcomes: int  # charge outcomes in the last `window_days` (what decides low_volume)
    recovery: Bucket  # finished invoices whose failure falls in the judged window
    spikes: tuple[Spike, ...]


@dataclass(frozen=True, kw_only=True)
class ReviewItem:
    """A flagged low-volume merchant id; `tag` and whether the data contradicts it."""

    merchant_id: str
    window_days: int
    spikes: tuple[Spike, ...]
    tag: MerchantTag | None
    contradicted: bool
    reason: str


@dataclass(frozen=True, kw_only=True)
class Judging:
    """What judging merchants needs from the report's options."""

    now: datetime
    window_days: int
    low_volume_window_days: int
    baseline_windows: int
    min_volume: int
    spike_min_count: int
    confidence: float


def judge_merchants(
    events: Mapping[str, list[ChargeEvent]],
    finished: Mapping[str, list[Invoice]],
    judging: Judging,
) -> list[MerchantJudgement]:
    """One judgement per merchant id seen in `events`, by merchant id."""
    short = timedelta(days=judging.window_days)
    judgements = []
    for merchant in sorted(events):
        mine = events[merchant]
        recent = window_counts(mine, judging.now - short, judging.now).total
        low_volume = recent < judging.min_volume
        days = judging.low_volume_window_days if low_volume else judging.window_days
        start = judging.now - timedelta(days=days)
        judged = [i for i in finished.get(merchant, []) if start <= i.failed_at < judging.now]
        recovered = sum(1 for i in judged if i.state is InvoiceState.RECOVERED)
        judgements.append(
            MerchantJudgement(
                merchant_id=merchant,
                window_days=days,
                low_volume=low_volume,
                recent_outcomes=recent,
                recovery=make_bucket(
                    merchant,
                    recovered,
                    len(judged),
                    min_volume=judging.min_volume,
                    confidence=judging.confidence,
                ),
                spikes=tuple(
                    find_spikes(
                        mine,
                        dimension="merchant_id",
                        key=merchant,
                        end=judging.now,
                        window_days=days,
                        baseline_windows=judging.baseline_windows,
                        confidence=judging.confidence,
                        min_count=judging.spike_min_count,
                    )
                ),
            )
        )
    return judgements


def latest_tags(tags: Sequence[MerchantTag], now: datetime) -> dict[str, MerchantTag]:
    """The tag in force per merchant id at `now` (the latest made at or before it)."""
    latest: dict[str, MerchantTag] = {}
    for tag in tags:
        if tag.tagged_at > now:
            continue
        held = latest.get(tag.merchant_id)
        if held is None or tag.tagged_at >= held.tagged_at:
            latest[tag.merchant_id] = tag
    return latest


def contradiction(
    judgement: MerchantJudgement,
    tag: MerchantTag,
    events: list[ChargeEvent],
    confidence: float,
) -> str | None:
    """Why the data contradicts `tag` (module docstring), or None when the tag holds."""
    since = tag.tagged_at - timedelta(days=judgement.window_days)
    if window_counts(events, since, tag.tagged_at).total == 0:
        return "no charge outcome in the window before the tag"
    for spike in judgement.spikes:
        then = window_counts(events, since, tag.tagged_at, spike.among)
        at_tag = share(then.by_code.get(spike.decline_code, 0), then.total, confidence)
        if spike.current.low > at_tag.high:
            return (
                f"{spike.decline_code}: {spike.current.count}/{spike.current.total} now against "
                f"{at_tag.count}/{at_tag.total} when tagged"
            )
    return None


def review_queue(
    judgements: Sequence[MerchantJudgement],
    events: Mapping[str, list[ChargeEvent]],
    tags: Sequence[MerchantTag],
    judging: Judging,
) -> tuple[list[ReviewItem], list[ReviewItem]]:
    """(the queue, the flagged ones a tag suppresses): low-volume merchant ids with a spike."""
    in_force = latest_tags(tags, judging.now)
    queue: list[ReviewItem] = []
    suppressed: list[ReviewItem] = []
    for j in judgements:
        if not (j.low_volume and j.spikes):
            continue
        tag = in_force.get(j.merchant_id)
        codes = ", ".join(s.decline_code for s in j.spikes)
        if tag is None:
            queue.append(_item(j, None, False, f"decline-code spike: {codes}"))
            continue
        why = contradiction(j, tag, events[j.merchant_id], judging.confidence)
        if why is None:
            suppressed.append(_item(j, tag, False, f"tagged {tag.tag}; spike: {codes}"))
        else:
            queue.append(_item(j, tag, True, f"tag contradicted: {why}"))
    return queue, suppressed


def _item(
    j: MerchantJudgement, tag: MerchantTag | None, contradicted: bool, reason: str
) -> ReviewItem:
    return ReviewItem(
        merchant_id=j.merchant_id,
        window_days=j.window_days,
        spikes=j.spikes,
        tag=tag,
        contradicted=contradicted,
        reason=reason,
    )


__all__ = [
    "TAG_KINDS",
    "Judging",
    "MerchantJudgement",
    "MerchantTag",
    "ReviewItem",
    "contradiction",
    "judge_merchants",
    "latest_tags",
    "review_queue",
]
