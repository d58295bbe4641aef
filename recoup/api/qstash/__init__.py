"""A QStash-compatible API at `/qstash/v2/...`: the official `qstash` SDK, given
`base_url=".../qstash"` and a Recoup API token, publishes messages and manages schedules on
Recoup's own jobs and schedules (no store of its own), and its `Receiver` verifies the
deliveries (`recoup.jobs.qstash_signing`). `headers` reads QStash's request headers, `shapes`
writes QStash's JSON, `messages` and `schedules` are the routes. Not in /openapi.json: the
API is QStash's, documented by Upstash."""

from fastapi import APIRouter

from recoup.api.qstash import messages, schedules

PREFIX = "/qstash/v2"

router = APIRouter(prefix=PREFIX, include_in_schema=False, tags=["qstash"])
router.include_router(messages.router)
router.include_router(schedules.router)

__all__ = ["PREFIX", "router"]
