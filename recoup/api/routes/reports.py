"""The recovery report's routes under /v1/dunning: the report (JSON or one HTML page), the
merchant tags, and the review queue.

Handlers translate HTTP to `recoup.recovery.reporting.Reports` calls over the app's store and
clock (virtual on a server on a test clock), scoped to the authenticated tenant.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import AwareDatetime, BeforeValidator
from starlette.responses import HTMLResponse, Response

from recoup.analytics.recovery import render_html, report_json
from recoup.analytics.recovery.html_report import ExtraTable
from recoup.api.dashboard.rendering import money as money_text
from recoup.api.deps import Api, Tenant
from recoup.api.idempotent import json_response
from recoup.api.routes.common import CHECKED, ERRORS, NO_NUL
from recoup.api.state import ApiState
from recoup.errors import InvalidInput
from recoup.recovery.figures import MONEY_KINDS
from recoup.recovery.reporting import Reports
from recoup.wire.reports import ReviewQueueOut, TagIn, TagOut

router = APIRouter(
    prefix="/v1/dunning", responses=ERRORS, tags=["recovery report"], dependencies=CHECKED
)

MerchantId = Annotated[str, Path(min_length=1, max_length=100, pattern=NO_NUL)]


def _not_a_number(value: Any) -> Any:
    """Pydantic reads "0.5" as Unix time; an instant here is written out (found by fuzzing)."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return value
        raise ValueError(
            "expected ISO 8601 with an offset, e.g. 2026-06-01T00:00:00Z, not a number"
        )
    return value


Instant = Annotated[
    AwareDatetime | None,
    BeforeValidator(_not_a_number),
    Query(description="ISO 8601 with an offset, e.g. 2026-06-01T00:00:00Z."),
]
MinVolume = Annotated[
    int | None,
    Query(ge=1, le=1_000_000, description="Buckets below this count say insufficient data."),
]


def money_table(money: dict[str, dict[str, int]]) -> ExtraTable:
    """The `amounts` of the JSON document as a table of the HTML page, one row a currency."""
    return ExtraTable(
        title="Money",
        columns=("Currency", "Recovered", "At risk", "Lost", "Stopped"),
        rows=tuple(
            (currency.upper(), *(money_text(kinds[kind], currency) for kind in MONEY_KINDS))
            for currency, kinds in money.items()
        ),
        note="The amounts of the report's invoices by the state they are in now: at risk is"
        " still retrying or waiting for the customer, lost is every attempt spent.",
    )


def _reports(api: ApiState) -> Reports:
    return Reports(api.dunning.store, api.clock)


@router.get(
    "/report",
    response_model=None,
    responses={
        200: {
            "description": "The report: `report_json`'s document, or one self-contained page.",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/html": {"schema": {"type": "string"}},
            },
        }
    },
)
def get_report(
    tenant: Tenant,
    api: Api,
    since: Instant = None,
    until: Instant = None,
    min_volume: MinVolume = None,
    format: Literal["json", "html"] = "json",
) -> Response:
    """The recovery report of the invoices that failed in [since, until): until defaults to
    now, since to as far back as the report's judgements look (150 days by default)."""
    reports = _reports(api)
    report, window = reports.build(tenant, since=since, until=until, min_volume=min_volume)
    if format == "html":
        try:
            extras = [money_table(reports.money(tenant, window))]
            return HTMLResponse(render_html(report, extras=extras))
        except ModuleNotFoundError as exc:  # matplotlib or jinja2: the `plot` extra
            raise InvalidInput(
                "format",
                format,
                f"expected json: this server lacks {exc.name} (pip install 'recoup[plot]')",
            ) from None
    # The window first: the report's own options say `now`, not which invoices it covers; then
    # the amounts of those invoices by currency and kind, in minor units, as /metrics sums them.
    document: dict[str, Any] = {
        "since": window.since.isoformat(),
        "until": window.until.isoformat(),
        **report_json(report),
        "amounts": reports.money(tenant, window),
    }
    return Response(json.dumps(document, ensure_ascii=False), media_type="application/json")


@router.put("/merchants/{merchant_id}/tag", response_model=TagOut)
def put_tag(merchant_id: MerchantId, body: TagIn, tenant: Tenant, api: Api) -> Response:
    """Tag a merchant id (seasonal, newly onboarded, other), replacing its tag: the review
    queue leaves it out until its data contradicts the tag."""
    stored = _reports(api).tag(tenant, merchant_id, body.tag, body.note)
    return json_response(200, TagOut.of(stored))


@router.delete(
    "/merchants/{merchant_id}/tag",
    status_code=204,
    responses={204: {"description": "Removed now, or there was none (a repeat is harmless)."}},
)
def delete_tag(merchant_id: MerchantId, tenant: Tenant, api: Api) -> Response:
    """Remove a merchant id's tag: it may be flagged again. Idempotent, as every DELETE."""
    _reports(api).untag(tenant, merchant_id)
    return Response(status_code=204)


@router.get("/review-queue", response_model=ReviewQueueOut)
def review_queue(tenant: Tenant, api: Api, min_volume: MinVolume = None) -> Response:
    """The low-volume merchant ids flagged for review now (a decline-code spike against their
    own baseline), tagged ones only when the data contradicts the tag; then those a tag
    suppresses, and every tag."""
    reports = _reports(api)
    report, window = reports.build(tenant, min_volume=min_volume)
    queue = ReviewQueueOut.of(
        report_json(report), now=window.now, since=window.since, tags=reports.tags(tenant)
    )
    return json_response(200, queue)


__all__ = ["router"]
