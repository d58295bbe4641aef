"""Tokens and signing secrets appear once, where they are made (`tenants create`,
`tokens create`, `tenants rotate-secret`), and never afterwards: not in any later command's
output, not in any API response (bodies or headers, whatever the status), not in any log
record of the CLI, the API, the worker or the server, on both backends."""

from __future__ import annotations

import contextlib
import json
import logging
import random
from collections.abc import Iterator

import httpx
import pytest

from recoup.api.app import create_app
from recoup.api.rate_limits import RateLimit, TenantRateLimiter
from recoup.cli import main
from recoup.jobs.model import HttpTarget
from recoup.jobs.scheduler import Scheduler
from recoup.jobs.ssrf import SsrfGuard
from recoup.storage import Store
from recoup.tenancy import IssuedToken, new_tenant
from recoup.timekeeping.clock import SystemClock
from tests.api.conftest import TARGET, api_settings
from tests.api.dashboard.desk import csrf_of
from tests.jobs.support import Receiver, Reply
from tests.storage.conftest import Backend
from tests.support import ServerThread

# The test's own HTTP client logs its requests at DEBUG (with the Authorization header it was
# given); what is checked is everything Recoup and its server log.
CLIENT_LOGGERS = ("httpx", "httpcore")
SERVER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")


class Transcript:
    """Everything a secret could leak into, and the secrets made so far."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys
        self.secrets: set[str] = set()
        self.texts: list[tuple[str, str]] = []  # (where, text) seen after creation
        self.statuses: list[int] = []

    def cli(self, *argv: str, makes: tuple[str, ...] = ()) -> dict[str, object] | None:
        """Run a command; `makes` names the JSON fields holding a secret it creates (allowed in
        this output only)."""
        code = main(list(argv))
        out, err = self.capsys.readouterr()
        assert code == 0, err
        if makes:
            made = json.loads(out)
            self.secrets.update(str(made[name]) for name in makes)
            found: dict[str, object] = made
            return found
        self.texts.append((" ".join(argv[:2]), out + err))
        return None

    def response(self, response: httpx.Response) -> httpx.Response:
        self.statuses.append(response.status_code)
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
        where = f"{response.request.method} {response.url.path}"
        self.texts.append((where, headers + response.text))
        return response

    def assert_clean(self, records: list[logging.LogRecord]) -> None:
        assert self.secrets, "the flows made no secret: nothing was checked"
        logged = [
            (f"log {r.name}", r.getMessage() + (str(r.exc_info) if r.exc_info else ""))
            for r in records
            if not r.name.startswith(CLIENT_LOGGERS)
        ]
        names = {r.name for r in records}
        assert {"recoup.worker", "uvicorn.access"} <= names, f"records not captured: {names}"
        for where, text in self.texts + logged:
            for secret in self.secrets:
                assert secret not in text, f"a secret leaked into {where}"
                assert secret[len("whsec_") :] not in text, f"a secret leaked into {where}"


@contextlib.contextmanager
def server_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """uvicorn's own loggers, which it configures when a server is made (replacing their
    handlers) and which do not propagate to the root: captured too, at every level."""
    loggers = [logging.getLogger(name) for name in SERVER_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(caplog.handler)
        logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(caplog.handler)
            logger.setLevel(level)


def test_tokens_and_secrets_never_appear_after_their_creation(
    backend: Backend,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    seen = Transcript(capsys)
    db = backend.db_args()

    # The command line: creation, listings, rotation, revocation, disable and enable.
    acme = seen.cli("tenants", "create", "acme", *db, "--json", makes=("token", "signing_secret"))
    assert acme is not None
    second = seen.cli("tokens", "create", "acme", "--label", "ci", *db, "--json", makes=("token",))
    assert second is not None
    seen.cli("tenants", "create", "other", *db, "--json", makes=("token", "signing_secret"))
    for json_flag in ((), ("--json",)):
        seen.cli("tokens", "list", *db, *json_flag)
        seen.cli("tenants", "list", *db, *json_flag)
    rotated = seen.cli(
        "tenants", "rotate-secret", "acme", "--overlap", "1h", *db, "--json",
        makes=("signing_secret",),
    )  # fmt: skip
    assert rotated is not None
    seen.cli("tenants", "list", *db)
    seen.cli("tenants", "list", *db, "--json")
    seen.cli("tokens", "revoke", str(second["id"]), *db)

    # The API: good, unknown, revoked, disabled and rate-limited tokens, valid and invalid bodies.
    limiter = TenantRateLimiter(RateLimit(rate=0.001, burst=3.0))
    app = create_app(store, clock=SystemClock(), settings=api_settings(), limiter=limiter)
    with ServerThread(app) as server, server_logs(caplog):
        with httpx.Client(base_url=server.url, timeout=30.0) as client:
            good = {"Authorization": f"Bearer {acme['token']}"}
            seen.response(client.get("/v1/jobs", headers=good))
            seen.response(
                client.post(
                    "/v1/jobs",
                    headers={**good, "Idempotency-Key": "k-1"},
                    json={"delay_seconds": 60, "target": {"url": TARGET}},
                )
            )
            seen.response(client.post("/v1/jobs", headers=good, json={"delay_seconds": "x"}))
            for token in (str(second["token"]), str(acme["token"]) + "x", "rcp_" + "A" * 43):
                seen.response(client.get("/v1/jobs", headers={"Authorization": f"Bearer {token}"}))
            seen.response(client.get("/v1/jobs", headers=good))  # over its limit now: 429
            # The dashboard's sign-in takes the token in a form; its session holds a hash.
            form = seen.response(client.get("/login"))
            seen.response(
                client.post("/login", data={"csrf": csrf_of(form.text), "token": acme["token"]})
            )
            seen.response(client.get("/jobs"))
            store.set_tenant_disabled("acme", disabled=True, now=SystemClock().now())
            seen.response(client.get("/v1/jobs", headers=good))  # 403
            seen.response(client.get("/openapi.json"))
            seen.response(client.get("/metrics"))
    # Every kind of answer was exercised (and is in the transcript).
    assert {200, 201, 303, 401, 403, 422, 429} <= set(seen.statuses), seen.statuses
    store.set_tenant_disabled("acme", disabled=False, now=SystemClock().now())

    # The worker: deliveries signed with both of acme's secrets, one answered 500 and retried.
    receiver = Receiver()
    try:
        receiver.reply(Reply(500, body=b"no"))
        scheduler = Scheduler(store, ssrf=SsrfGuard(allow_private=True))
        store.ensure_tenant(new_tenant("acme", now=SystemClock().now()))  # exists: unchanged
        for n in range(2):
            scheduler.enqueue(HttpTarget(url=receiver.url, body={"n": n}), tenant="acme")
        # A tenant without a row: the worker warns that it has no secret (a record of its own).
        scheduler.enqueue(HttpTarget(url=receiver.url), tenant="ghost")
        scheduler.worker(rng=random.Random(0)).drain()
        assert len(receiver.requests) == 3
        signed = [r for r in receiver.requests if "webhook-signature" in r.headers]
        assert [len(r.headers["webhook-signature"].split(" ")) for r in signed] == [2, 2]
    finally:
        receiver.close()

    seen.assert_clean(caplog.records)


def test_records_and_issued_tokens_keep_secrets_out_of_their_repr() -> None:
    tenant = new_tenant("acme", now=SystemClock().now())
    assert tenant.signing_secret not in repr(tenant)
    assert "signing_secret" not in repr(tenant)
    from recoup.tenancy import TokenInfo

    info = TokenInfo(
        id="t", tenant="acme", prefix="rcp_abcdefgh", label=None,
        created_at=SystemClock().now(), revoked_at=None,
    )  # fmt: skip
    issued = IssuedToken(info=info, secret="rcp_secret-value")
    assert "rcp_secret-value" not in repr(issued)
