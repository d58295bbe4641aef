"""The dashboard: server-rendered HTML pages at `/`, behind a login with a tenant's API token.

Pages: jobs (search, cursor pages) and a job's run log, schedules with their next occurrences,
invoices in dunning with the period's money and their timelines, the recovery report with its
charts, the review queue, a preview of the customer emails, and a search box that finds an
invoice, a customer or a job by id or name. Actions (retry or cancel a job, stop an invoice's
dunning or mark it paid, one at a time or in bulk over a filter after a count and a
confirmation, tag a merchant id) are POST forms carrying a CSRF token; each records who did it
(`actions.py`). Pages with running work refresh themselves (`live.py`). Every page reads
through the same services as the /v1 API (`app.state.api`), scoped to the session's tenant:
another tenant's id is a 404, as it is in the API.

Sessions (`sessions.py`) are signed cookies holding the token's hash, never the token; the
hash is checked against the active tokens on every request. The signing key is
`RECOUP_DASHBOARD_SECRET` when set (so that several API processes accept each other's
sessions), else random per process (sessions end when the server restarts).
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Callable

from fastapi import FastAPI
from starlette.routing import BaseRoute
from starlette.staticfiles import StaticFiles

from recoup.api.dashboard import analytics, auth, bulk, emails, invoices, jobs, redrive, search
from recoup.api.dashboard.rendering import templates
from recoup.api.dashboard.sessions import Sessions, new_session_key
from recoup.api.dashboard.web import DashboardState
from recoup.api.shared_routes import include_once
from recoup.errors import InvalidInput

SECRET_ENV = "RECOUP_DASHBOARD_SECRET"
MIN_SECRET_LENGTH = 32  # characters of a configured secret


def session_key_from_env(environ: dict[str, str] | os._Environ[str] = os.environ) -> bytes | None:
    """The key that `RECOUP_DASHBOARD_SECRET` configures; None when it is unset."""
    secret = environ.get(SECRET_ENV)
    if secret is None:
        return None
    if len(secret) < MIN_SECRET_LENGTH:
        raise InvalidInput(
            SECRET_ENV, "(hidden)", f"expected at least {MIN_SECRET_LENGTH} characters"
        )
    return hashlib.sha256(secret.encode()).digest()


def mount(
    app: FastAPI,
    *,
    session_key: bytes | None = None,
    wall: Callable[[], float] = time.time,
) -> None:
    """Add the dashboard's pages and style sheet to `app` (made by `create_app`, whose
    `app.state.api` they read). `wall` is the real time sessions expire by."""
    key = session_key or session_key_from_env() or new_session_key()
    app.state.dashboard = DashboardState(sessions=Sessions(key, wall=wall), templates=templates())
    app.router.routes.extend(_page_routes())
    app.mount(
        "/static",
        StaticFiles(packages=[("recoup.api.dashboard", "static")]),
        name="dashboard-static",
    )


@functools.cache
def _page_routes() -> tuple[BaseRoute, ...]:
    """The pages' routes, shared by every app (`recoup.api.shared_routes`)."""
    return include_once(
        *(m.router for m in (auth, search, bulk, jobs, invoices, analytics, emails, redrive))
    )


__all__ = ["SECRET_ENV", "mount", "session_key_from_env"]
