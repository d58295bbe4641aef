"""Running a POST under its `Idempotency-Key` (IETF draft semantics, see
`recoup.idempotency.keys`).

Which responses are stored (as Stripe does): every response of an operation that ran to a
decision: success, or a 4xx the operation decided on the state it found (a live-name clash →
409, an unknown schedule → 404). Not stored: requests refused before the operation began
(authentication, body validation), which never claim the key; invalid input the operation
itself found (422: a target the SSRF guard refuses, a bad cron expression), and 5xx answers.
For those the key is released, so the corrected or retried request with the same key runs
afresh. Re-running after a 5xx is safe because the operations are themselves idempotent where
it matters: a job carries `operation_key` (the request's key and fingerprint), and the job store
answers a second insert with that key with the first job; a schedule's id is `derived_id`, and
a retry finds the schedule the first attempt stored.

Atomic runs (`run(..., atomic=True)`, what `POST /v1/jobs` uses): when the operation is plain
writes of the keys' own database, the claim, the operation and the stored response are one
transaction (`IdempotencyStore.atomically`; on SQLite, concurrent requests share one commit).
A failed operation rolls its claim back with it, so no lock outlives a crashed request; a
refusal worth replaying is then stored in a transaction of its own. A second request with the
same key waits for the first one's commit and gets its replay, where the three-step run
answers 409 while the first is in flight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import assert_never

from fastapi import Request
from pydantic import BaseModel
from starlette.responses import Response

from recoup.api.echoes import echo_header
from recoup.api.problems import (
    ApiProblem,
    BodyTooLarge,
    FieldError,
    problem_for,
    problem_response,
)
from recoup.errors import InvalidInput, RecoupError, StorageError
from recoup.idempotency import (
    IdempotencyStore,
    InProgress,
    Mismatch,
    New,
    Outcome,
    Replay,
    derived_id,
    fingerprint,
    operation_key,
    parse_key,
)
from recoup.timekeeping.clock import Clock

REPLAYED_HEADER = "Idempotent-Replayed"
JSON = "application/json"
RELEASE_TRIES = 4  # a pool's dropped connections met in turn before a fresh one (see _release)


def json_response(status: int, model: BaseModel) -> Response:
    # pydantic's own serializer: compact UTF-8, a third of json.dumps over model_dump's time.
    return Response(model.model_dump_json().encode(), status_code=status, media_type=JSON)


@dataclass(frozen=True, kw_only=True)
class PostContext:
    """What a POST handler needs to run its operation under the request's key."""

    tenant: str
    key: str | None
    fingerprint: str
    method: str
    path: str
    store: IdempotencyStore
    clock: Clock
    lock_timeout: timedelta
    # Run first in the operation's transaction (or before it, without one): a cached token
    # owner's check (`TokenCache.check`), whose `StaleToken` undoes the run.
    guard: Callable[[], None] | None = None

    @property
    def operation_key(self) -> str | None:
        """The idempotency key of a job this request creates (None without a key)."""
        return None if self.key is None else operation_key(self.key, self.fingerprint)

    def derived_id(self, kind: str) -> str | None:
        """The id of the `kind` of record this request creates, the same on every retry of
        it (None without a key: the caller mints a fresh one)."""
        if self.key is None:
            return None
        return derived_id(kind, self.tenant, self.key, self.fingerprint)

    def run(
        self, status: int, operation: Callable[[], BaseModel], *, atomic: bool = False
    ) -> Response:
        """Run `operation` once per key and answer its result as JSON with `status`; a
        `RecoupError` it raises becomes its problem response (stored too, unless it is invalid
        input or a 5xx: see the module docstring). `atomic`: the operation is plain writes of
        the keys' database (no network, no other store), so the claim, the operation and the
        stored response are one transaction (`IdempotencyStore.atomically`): one commit
        instead of three, and no lock left behind by a request that dies mid-way."""
        return self.run_with_status(lambda: (status, operation()), atomic=atomic)

    def run_with_status(
        self, operation: Callable[[], tuple[int, BaseModel]], *, atomic: bool = False
    ) -> Response:
        """`run` for an operation that decides its own status (201 created, 200 found)."""
        if self.key is None:
            self._check_guard()
            return json_response(*operation())
        if atomic:
            return self._run_atomically(operation)
        self._check_guard()
        outcome = self._begin()
        if not isinstance(outcome, New):
            return self._answer(outcome)
        locked_at = outcome.locked_at
        try:
            response = json_response(*operation())
            keep = True
        except _ANSWERED_ELSEWHERE:
            self._release(locked_at)
            raise
        except RecoupError as exc:
            response = problem_response(problem_for(exc))
            keep = _worth_keeping(exc)
        except BaseException:
            self._release(locked_at)
            raise
        if not keep:
            self._release(locked_at)
        else:
            self._complete(locked_at, response)
        return response

    def _run_atomically(self, operation: Callable[[], tuple[int, BaseModel]]) -> Response:
        def unit() -> Response | Replay | InProgress | Mismatch:
            self._check_guard()
            outcome = self._begin()
            if not isinstance(outcome, New):
                return outcome
            try:
                response = json_response(*operation())
            except _ANSWERED_ELSEWHERE:
                raise
            except RecoupError as exc:
                raise _Refused(exc) from exc
            self._complete(outcome.locked_at, response)
            return response

        try:
            result = self.store.atomically(unit)
        except _Refused as refused:
            # The transaction rolled back, the claim with it: the key is free, as `release`
            # leaves it. A decision worth replaying is stored in a transaction of its own.
            response = problem_response(problem_for(refused.error))
            if _worth_keeping(refused.error):
                outcome = self._begin()
                if isinstance(outcome, New):  # else another request holds the key by now
                    self._complete(outcome.locked_at, response)
            return response
        return result if isinstance(result, Response) else self._answer(result)

    def _check_guard(self) -> None:
        if self.guard is not None:
            self.guard()

    def _begin(self) -> Outcome:
        assert self.key is not None
        return self.store.begin(
            tenant=self.tenant,
            key=self.key,
            fingerprint=self.fingerprint,
            method=self.method,
            path=self.path,
            now=self.clock.now(),
            lock_timeout=self.lock_timeout,
        )

    def _release(self, locked_at: datetime) -> None:
        """Free the key, asking again when the database fails: an operation that failed on a
        dropped connection (a restarted or terminated server) meets the pool's other dropped
        connections here, and a key left locked refuses the client's retry with 409 until its
        lock times out. Each failed connection leaves the pool, so a later try gets a fresh one."""
        assert self.key is not None
        for attempt in range(1, RELEASE_TRIES + 1):
            try:
                self.store.release(tenant=self.tenant, key=self.key, locked_at=locked_at)
                return
            except StorageError:
                if attempt == RELEASE_TRIES:
                    raise

    def _complete(self, locked_at: datetime, response: Response) -> None:
        assert self.key is not None
        self.store.complete(
            tenant=self.tenant,
            key=self.key,
            locked_at=locked_at,
            status=response.status_code,
            body=bytes(response.body),
            content_type=response.media_type or JSON,
        )

    def _answer(self, outcome: Replay | InProgress | Mismatch) -> Response:
        """The answer to a request whose key another request claimed first."""
        match outcome:
            case Replay(status=stored_status, body=body, content_type=content_type):
                return Response(
                    body,
                    status_code=stored_status,
                    media_type=content_type,
                    headers={REPLAYED_HEADER: "true"},
                )
            case InProgress(retry_after=seconds):
                raise ApiProblem(
                    409,
                    "idempotency-key-in-use",
                    "a request with this Idempotency-Key is still being processed; retry later",
                    headers={"Retry-After": str(seconds)},
                )
            case Mismatch():
                raise ApiProblem(
                    422,
                    "idempotency-key-reused",
                    "this Idempotency-Key was used with a different request (method, path or "
                    "body); use a new key for a new request",
                    errors=[
                        FieldError(
                            field="Idempotency-Key",
                            message="already used for a different request",
                            value=echo_header(self.key or ""),
                        )
                    ],
                )
            case _:
                assert_never(outcome)


# Errors of the HTTP layer, not the operation's decision: answered by their own handlers (with
# their headers), never stored under the key, which is freed as for any other exception.
_ANSWERED_ELSEWHERE = (ApiProblem, BodyTooLarge)


class _Refused(RecoupError):
    """The operation of an atomic run raised `error`: undo the run's transaction."""

    def __init__(self, error: RecoupError) -> None:
        super().__init__(str(error))
        self.error = error


def _worth_keeping(error: RecoupError) -> bool:
    """Invalid input and 5xx are no decision worth replaying: the key is freed for them."""
    return not isinstance(error, InvalidInput) and error.http_status < 500


async def post_context(
    request: Request,
    tenant: str,
    header: str | None,
    store: IdempotencyStore,
    clock: Clock,
    lock_timeout: timedelta,
) -> PostContext:
    """Parse the key (400 if malformed, as the draft asks) and fingerprint the request."""
    key = None
    if header is not None:
        try:
            key = parse_key(header)
        except InvalidInput as exc:
            # Echoed as `echo_header` reads it: UTF-8 (not the latin-1 Starlette decodes
            # header bytes as), printable, and cut with its length said.
            shown = echo_header(header)
            raise ApiProblem(
                400,
                "invalid-idempotency-key",
                f"Idempotency-Key: {shown} is not valid; {exc.allowed}",
                errors=[FieldError(field="Idempotency-Key", message=exc.allowed, value=shown)],
            ) from None
    body = await request.body()  # cached by Starlette: the body parser reads the same bytes
    path = request.url.path
    return PostContext(
        tenant=tenant,
        key=key,
        fingerprint=fingerprint(request.method, path, body),
        method=request.method,
        path=path,
        store=store,
        clock=clock,
        lock_timeout=lock_timeout,
    )
