"""Request and response models of the recovery report's routes: merchant tags and the review
queue (strict, as in `schemas`). The report itself is `report_json`'s document, versioned by
its `schema` key, not a model here."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from recoup.analytics.recovery import MerchantTag
from recoup.wire.schemas.common import StrictModel, Text


class TagIn(StrictModel):
    tag: Literal["seasonal", "new", "other"] = Field(
        description="seasonal, new (newly onboarded) or other: the review queue leaves the "
        "merchant id out until its data contradicts the tag."
    )
    note: Text = Field(default="", max_length=1000, description="Why, for the next reader.")


class TagOut(BaseModel):
    merchant_id: str
    tag: str
    note: str
    tagged_at: datetime

    @classmethod
    def of(cls, tag: MerchantTag) -> TagOut:
        return cls(merchant_id=tag.merchant_id, tag=tag.tag, note=tag.note, tagged_at=tag.tagged_at)


class ReviewItemOut(BaseModel):
    """A flagged low-volume merchant id, as in the report's `review_queue`."""

    merchant_id: str
    window_days: int
    reason: str
    contradicted: bool = Field(description="Tagged, but the data contradicts the tag.")
    tag: TagOut | None
    spikes: list[dict[str, Any]] = Field(description="As in the report's `spikes`.")


class ReviewQueueOut(BaseModel):
    now: datetime
    since: datetime = Field(description="The earliest failure the judgements looked at.")
    review_queue: list[ReviewItemOut]
    suppressed: list[ReviewItemOut] = Field(
        description="Flagged, but left out of the queue by a tag the data does not contradict."
    )
    tags: list[TagOut] = Field(description="Every tag of the tenant, by merchant id.")

    @classmethod
    def of(
        cls,
        document: dict[str, Any],
        *,
        now: datetime,
        since: datetime,
        tags: list[MerchantTag],
    ) -> ReviewQueueOut:
        """The queue of a report's JSON `document` (`report_json`) judged in [since, now), and
        the tenant's `tags`: what the route answers and `recoup merchants review` prints."""
        return cls(
            now=now,
            since=since,
            review_queue=[ReviewItemOut.model_validate(i) for i in document["review_queue"]],
            suppressed=[ReviewItemOut.model_validate(i) for i in document["suppressed"]],
            tags=[TagOut.of(t) for t in tags],
        )


__all__ = ["ReviewItemOut", "ReviewQueueOut", "TagIn", "TagOut"]
