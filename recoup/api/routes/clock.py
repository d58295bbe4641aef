"""The /v1/clock routes: read and move a test clock (only on a server on a virtual clock).

`create_app` includes this router only when it is given a `TestClock`; elsewhere /v1/clock is
an unknown path (404).
"""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter
from starlette.responses import Response

from recoup.api.deps import Api, Tenant
from recoup.api.idempotent import json_response
from recoup.api.routes.common import CHECKED, ERRORS
from recoup.api.state import ApiState
from recoup.errors import NotFound
from recoup.jobs.time_travel import TestClock
from recoup.wire.dunning import ClockIn, ClockOut
from recoup.wire.schemas import ExactlyOne

router = APIRouter(prefix="/v1", responses=ERRORS, tags=["test clock"], dependencies=CHECKED)


def _test_clock(api: ApiState) -> TestClock:
    if api.test_clock is None:  # the router included in an app without a test clock
        raise NotFound("this server does not run on a test clock")
    return api.test_clock


@router.get("/clock", response_model=ClockOut)
def read_clock(tenant: Tenant, api: Api) -> Response:
    return json_response(200, ClockOut(now=_test_clock(api).now()))


@router.post("/clock", response_model=ClockOut)
def move_clock(body: ClockIn, tenant: Tenant, api: Api) -> Response:
    """Move the virtual clock forward by `advance_seconds` or to `to`; returns once every
    job due up to the new instant has run, in due order."""
    test_clock = _test_clock(api)
    if (body.advance_seconds is None) == (body.to is None):
        raise ExactlyOne("advance_seconds", "to")
    if body.to is not None:
        ran = test_clock.advance_to(body.to)
    else:
        assert body.advance_seconds is not None
        ran = test_clock.advance(timedelta(seconds=body.advance_seconds))
    return json_response(200, ClockOut(now=test_clock.now(), ran=ran))


__all__ = ["router"]
