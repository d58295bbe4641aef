"""The dashboard's recovery analytics: the report with its charts, and the review queue of
flagged low-volume merchant ids with a form to tag one.

The report is the one `GET /v1/dunning/report` serves: `recoup.recovery.reporting.Reports`
reads the tenant's invoices, tags and double charges on the app's clock, the pure
`build_report` judges them, and `chart_svgs` draws the charts (matplotlib, the `plot` extra;
without it the page says so and shows the tables). Tags go through `Reports.tag`, as
`PUT /v1/dunning/merchants/{id}/tag` does.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from recoup.analytics.recovery import TAG_KINDS, chart_svgs
from recoup.analytics.recovery.text import (
    experiment_verdict,
    interval_text,
    percent,
    rate_text,
    sections,
    share_text,
)
from recoup.api.dashboard.web import (
    Acting,
    HtmlRoute,
    SignedIn,
    render,
    see_other,
    text_param,
)
from recoup.api.deps import Api
from recoup.api.state import ApiState
from recoup.errors import InvalidInput
from recoup.recovery.reporting import Reports

router = APIRouter(route_class=HtmlRoute, include_in_schema=False)

MAX_MIN_VOLUME = 1_000_000
MAX_NOTE = 1000  # characters of a tag's note, as the store keeps it

# What the templates format figures with: the report renderers' own wording.
FIGURES = {
    "rate_text": rate_text,
    "interval_text": interval_text,
    "share_text": share_text,
    "percent": percent,
}


def _reports(api: ApiState) -> Reports:
    return Reports(api.dunning.store, api.clock)


def _min_volume(value: str | None) -> int | None:
    text = text_param("min_volume", value, max_length=10)
    if text is None:
        return None
    if not text.isdigit() or not 1 <= int(text) <= MAX_MIN_VOLUME:
        raise InvalidInput("min_volume", text, f"expected a whole number 1–{MAX_MIN_VOLUME}")
    return int(text)


@router.get("/analytics")
def analytics_page(
    request: Request,
    visitor: SignedIn,
    api: Api,
    min_volume: str | None = None,
    empty: str | None = None,
) -> Response:
    """The tenant's recovery report, with charts and the money of its invoices (as GET
    /v1/dunning/report's `amounts`); buckets with nothing in them are left out of the tables
    unless `empty=shown`."""
    if empty not in (None, "", "shown", "hidden"):
        raise InvalidInput("empty", empty, "expected shown or hidden")
    keep_empty = empty == "shown"
    reports = _reports(api)
    report, window = reports.build(visitor.tenant, min_volume=_min_volume(min_volume))
    try:
        charts, missing = chart_svgs(report), None
    except ModuleNotFoundError as exc:  # matplotlib: the `plot` extra
        charts, missing = {}, exc.name
    level = f"{report.options.confidence:.0%}"
    return render(
        request,
        "analytics.html",
        {
            "visitor": visitor,
            "nav": "analytics",
            "r": report,
            "window": window,
            "money": reports.money(visitor.tenant, window),
            "level": level,
            "charts": charts,
            "missing": missing,
            "sections": sections(report, keep_empty=keep_empty),
            "keep_empty": keep_empty,
            "verdict": experiment_verdict(report.experiment, level) if report.experiment else "",
            **FIGURES,
        },
    )


@router.get("/review")
def review_page(
    request: Request, visitor: SignedIn, api: Api, notice: str | None = None
) -> Response:
    """Flagged low-volume merchant ids (a decline-code spike against their own baseline), those
    a tag suppresses, and every tag."""
    reports = _reports(api)
    flagged, suppressed, window = reports.review_queue(visitor.tenant)
    return render(
        request,
        "review.html",
        {
            "visitor": visitor,
            "nav": "review",
            "flagged": flagged,
            "suppressed": suppressed,
            "tags": reports.tags(visitor.tenant),
            "kinds": TAG_KINDS,
            "window": window,
            "notice": notice,
            **FIGURES,
        },
    )


@router.post("/review/tag")
def tag_merchant(action: Acting, api: Api) -> Response:
    """Tag a merchant id (replacing its tag): the review queue leaves it out until its data
    contradicts the tag."""
    merchant_id = text_param("merchant_id", action.form.get("merchant_id"), max_length=100)
    if merchant_id is None:
        raise InvalidInput("merchant_id", "", "expected 1–100 characters")
    tag = action.form.get("tag", "")
    if tag not in TAG_KINDS:
        raise InvalidInput("tag", tag, f"expected one of {', '.join(TAG_KINDS)}")
    note = action.form.get("note", "").strip()
    if len(note) > MAX_NOTE or "\x00" in note:
        raise InvalidInput("note", note, f"expected at most {MAX_NOTE} characters, no NUL")
    _reports(api).tag(action.tenant, merchant_id, tag, note)
    return see_other("/review", notice="tagged")


__all__ = ["router"]
