"""A QStash-compatible API at `/qstash/v2/...`: the official `qstash` SDK, given
`base_url=".../qstash"` and a Recoup API token, publishes messages and manages schedules on
Recoup's own jobs and schedules (no store of its own), and its `Receiver` verifies the
deliveries (`recoup.jobs.qstash_signing`). `headers` reads QStash's request headers, `shapes`
writes QStash's JSON, `messages`, `schedules` and `dlq` (the dead-letter queue: failed jobs)
are the routes. Not in /openapi.json: the
API is QStash's, documented by Upstash."""

from fastapi import APIRouter
from starlette.responses import Response

from recoup.api.problems import ApiProblem
from recoup.api.qstash import dlq, messages, schedules

PREFIX = "/qstash/v2"

router = APIRouter(prefix=PREFIX, include_in_schema=False, tags=["qstash"])
router.include_router(messages.router)
router.include_router(schedules.router)
router.include_router(dlq.router)

SUPPORTED = (
    "POST /v2/publish/{url}, GET|DELETE /v2/messages/{id}, DELETE /v2/messages, "
    "POST /v2/schedules/{url}, GET /v2/schedules[/{id}], DELETE /v2/schedules/{id}, "
    "PATCH /v2/schedules/{id}/pause|resume, GET /v2/keys, GET /v2/dlq, GET|DELETE "
    "/v2/dlq/{id}, DELETE /v2/dlq"
)


@router.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
def unsupported(rest: str) -> Response:
    """QStash routes Recoup does not offer (batch, enqueue, queues, URL groups, logs, …):
    404 naming the route and listing the supported ones, rather than a bare "Not Found"."""
    raise ApiProblem(
        404,
        "qstash-unsupported-route",
        f"/v2/{rest} is not supported by Recoup's QStash-compatible API; supported: {SUPPORTED}",
    )


__all__ = ["PREFIX", "router"]
