"""`@idempotent_webhook`: a Django view that receives Standard Webhooks deliveries (Recoup's
charge requests and events, or any sender of the format), verified and run at most once per
delivery, whatever how often the sender retries.

    from recoup.contrib.django import idempotent_webhook

    @idempotent_webhook(secret_setting="RECOUP_SIGNING_SECRET")
    def recoup_event(request):
        ...  # runs once per delivery; its response is stored and replayed
        return JsonResponse({"ok": True})

What the decorator does, in order (a POST only: any other method is 405; no CSRF token, the
signature stands for it):

1. verifies `webhook-id`, `webhook-timestamp` and `webhook-signature` against the secret(s)
   in `settings.<secret_setting>` (a `whsec_…` string, or a list while rotating), at the
   clock's now within `tolerance` (`recoup.receiver.verify_signature`) → 401 problem+json;
2. takes the delivery's key: the `Idempotency-Key` header (which Recoup sends), else the
   `webhook-id` (the same on every retry of one message), prefixed by `key_prefix` → 400 if
   it is not a key (1–255 printable ASCII characters);
3. claims the key in a transaction of its own (`IdempotencyRecords.begin`): a completed
   delivery's response is replayed (with `Idempotent-Replayed: true`) without running the
   view; one still in flight → 409 with `Retry-After`; another body under the key → 422;
4. runs the view in a transaction (`atomic=True`) and stores its response in that same
   transaction, so the view's writes and the stored answer commit together or not at all.

A response is stored unless it is a 5xx, a "try again later" (408, 409, 425, 429) or marked
with `not_final(response)` (a pending charge); then the key is released and the next
delivery runs the view again. An exception in the view rolls back, releases the key, and is
answered as `recoup.receiver` answers it: `ProviderUnavailable` and database errors → 503
with `Retry-After`, another `RecoupError` of 4xx → that status naming the field; anything else
propagates (500: the sender retries).

The view reads the verified delivery with `delivery(request)`: its `webhook-id`, signing
instant, claimed key and the instant of receipt (the decorator's clock, for the view's own
time-dependent work).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import Any, Final, TypeVar, cast, overload

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, router, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseNotAllowed
from django.template.response import SimpleTemplateResponse
from django.views.decorators.csrf import csrf_exempt

from recoup.contrib.django.idempotency import IdempotencyRecords, Replayed
from recoup.contrib.django.models import IdempotencyRecord
from recoup.errors import InvalidInput, RecoupError, StorageError
from recoup.idempotency.keys import InProgress, Mismatch, New, parse_key
from recoup.payments.provider import ProviderUnavailable
from recoup.receiver.contract import MAX_TEXT_LENGTH
from recoup.receiver.endpoint import UNAVAILABLE_RETRY_AFTER, problem
from recoup.receiver.endpoint import HttpResponse as Answer
from recoup.receiver.errors import SignatureError
from recoup.receiver.idempotency import DEFAULT_LOCK_TIMEOUT, body_fingerprint
from recoup.receiver.signatures import DEFAULT_TOLERANCE, check_secrets, verify_signature
from recoup.timekeeping.clock import Clock, SystemClock

DEFAULT_SECRET_SETTING: Final = "RECOUP_SIGNING_SECRET"
# Answers that say "try again later": storing one would replay "later" forever.
RETRY_LATER: Final = frozenset({408, 409, 425, 429})
# Headers not stored with an answer: Django computes them again for the replay.
_UNSTORED_HEADERS: Final = frozenset({"content-type", "content-length"})
_FINAL_ATTRIBUTE: Final = "_recoup_final"
_DELIVERY_ATTRIBUTE: Final = "_recoup_delivery"

View = TypeVar("View", bound=Callable[..., HttpResponseBase])
log = logging.getLogger("recoup.contrib.django")


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """A verified delivery, as the decorated view sees it."""

    message_id: str  # webhook-id: the same on every retry of one message
    signed_at: datetime  # webhook-timestamp: when this attempt was signed
    key: str  # the idempotency key claimed (Idempotency-Key, else webhook-id; prefixed)
    received_at: datetime  # the decorator's clock at receipt


def delivery(request: HttpRequest) -> Delivery:
    """The delivery `@idempotent_webhook` verified for `request`. Raises LookupError in a view
    it does not decorate."""
    found = getattr(request, _DELIVERY_ATTRIBUTE, None)
    if not isinstance(found, Delivery):
        raise LookupError("this request did not go through @idempotent_webhook")
    return found


def not_final(response: HttpResponseBase) -> HttpResponseBase:
    """Mark `response` as not the final answer for its key (a pending charge, say): it is sent
    but not stored, and the next delivery with the key runs the view again."""
    setattr(response, _FINAL_ATTRIBUTE, False)
    return response


@overload
def idempotent_webhook(view: View, /) -> View: ...


@overload
def idempotent_webhook(
    view: None = None,
    /,
    *,
    secret_setting: str = DEFAULT_SECRET_SETTING,
    tolerance: timedelta = DEFAULT_TOLERANCE,
    lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT,
    clock: Clock | None = None,
    using: str | None = None,
    key_prefix: str = "",
    atomic: bool = True,
) -> Callable[[View], View]: ...


def idempotent_webhook(
    view: View | None = None,
    /,
    *,
    secret_setting: str = DEFAULT_SECRET_SETTING,
    tolerance: timedelta = DEFAULT_TOLERANCE,
    lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT,
    clock: Clock | None = None,
    using: str | None = None,
    key_prefix: str = "",
    atomic: bool = True,
) -> View | Callable[[View], View]:
    """Verify and deduplicate the deliveries a view receives (see the module docstring).

    `secret_setting`: the name of the setting that holds the `whsec_…` secret(s), read on each
    request; `tolerance`: how far `webhook-timestamp` may be from now; `lock_timeout`: how long
    a delivery in flight keeps its key before another may take it over (keep it above the
    view's longest run, a provider's timeout included); `clock`: the instant of receipt (the
    system clock unless a test freezes it); `using`: the database alias of the records (the
    router's choice for `IdempotencyRecord` by default); `key_prefix`: scopes keys when two
    endpoints may receive the same delivery id; `atomic`: run the view and store its answer in
    one transaction (False for a view that manages its own).
    """
    if tolerance <= timedelta(0):
        raise InvalidInput("tolerance", tolerance, "expected a positive duration")
    if lock_timeout <= timedelta(0):
        raise InvalidInput("lock_timeout", lock_timeout, "expected a positive duration")
    source: Clock = clock if clock is not None else SystemClock()

    def decorate(func: View) -> View:
        if inspect.iscoroutinefunction(func):
            raise TypeError(
                f"{func.__qualname__}: @idempotent_webhook takes a synchronous view (its "
                "transactions cannot span an await); Django runs it in a thread under ASGI"
            )

        @functools.wraps(func)
        def receive(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if request.method != "POST":
                return HttpResponseNotAllowed(["POST"])
            now = source.now()
            body = request.body
            headers = {name.lower(): value for name, value in request.headers.items()}
            try:
                message = verify_signature(
                    headers, body, secret=_secrets(secret_setting), now=now, tolerance=tolerance
                )
            except SignatureError as exc:
                return _django(problem(HTTPStatus.UNAUTHORIZED, "invalid-signature", str(exc)))
            try:
                given = headers.get("idempotency-key", "")
                key = key_prefix + parse_key(given if given.strip() else message.id)
            except InvalidInput as exc:
                answer = problem(HTTPStatus.BAD_REQUEST, "invalid-key", str(exc), exc)
                return _django(answer)
            if len(key) > MAX_TEXT_LENGTH:
                error = InvalidInput("Idempotency-Key", key, "expected a shorter key_prefix")
                return _django(problem(HTTPStatus.BAD_REQUEST, "invalid-key", str(error), error))
            found = Delivery(
                message_id=message.id, signed_at=message.timestamp, key=key, received_at=now
            )
            setattr(request, _DELIVERY_ATTRIBUTE, found)
            alias = using or router.db_for_write(IdempotencyRecord)
            records = IdempotencyRecords(using=alias, lock_timeout=lock_timeout)
            try:
                claim = records.begin(key, body_fingerprint(body), now=now)
            except DatabaseError as exc:
                return _django(_unavailable("storage-unavailable", str(exc)))
            match claim:
                case Replayed() as stored:
                    return _replay(stored)
                case InProgress(retry_after=seconds):
                    detail = f"Idempotency-Key: {key!r} is being processed by another request"
                    return _django(
                        problem(HTTPStatus.CONFLICT, "in-progress", detail, retry_after=seconds)
                    )
                case Mismatch():
                    detail = f"Idempotency-Key: {key!r} was first used with another body"
                    return _django(problem(HTTPStatus.UNPROCESSABLE_ENTITY, "key-reused", detail))
                case New(locked_at=locked_at):
                    return _run(func, request, args, kwargs, records, key, locked_at, atomic)

        # Deliveries carry no CSRF token (the signature stands for it), and the claim must
        # commit on its own even where ATOMIC_REQUESTS wraps every other view.
        wrapped = transaction.non_atomic_requests(csrf_exempt(receive))
        return cast(View, wrapped)

    return decorate(view) if view is not None else decorate


class _LockLost(RecoupError):
    """The key was taken over while the view ran: its writes must not commit."""


def _run(
    view: Callable[..., HttpResponseBase],
    request: HttpRequest,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    records: IdempotencyRecords,
    key: str,
    locked_at: datetime,
    atomic: bool,
) -> HttpResponseBase:
    try:
        with transaction.atomic(using=records.using) if atomic else nullcontext():
            response = view(request, *args, **kwargs)
            stored = _stored_form(response)
            if stored is None:
                records.release(key, locked_at=locked_at)
            elif not records.complete(key, locked_at=locked_at, **stored):
                if atomic:
                    raise _LockLost
                log.warning("idempotency key %r was taken over: the answer is not stored", key)
        return response
    except _LockLost:
        log.warning("idempotency key %r was taken over while its view ran: rolled back", key)
        detail = f"Idempotency-Key: {key!r} was taken over by another request"
        return _django(problem(HTTPStatus.CONFLICT, "in-progress", detail, retry_after=5))
    except BaseException as exc:
        _release(records, key, locked_at)
        answer = _answer_for(exc)
        if answer is None:
            raise
        return _django(answer)


def _stored_form(response: HttpResponseBase) -> dict[str, Any] | None:
    """What to store of a final answer, or None if it is not final."""
    if not getattr(response, _FINAL_ATTRIBUTE, True):
        return None
    if response.status_code >= 500 or response.status_code in RETRY_LATER:
        return None
    if isinstance(response, SimpleTemplateResponse) and not response.is_rendered:
        response.render()
    if not isinstance(response, HttpResponse):
        log.warning("a streaming or file response cannot be stored: the key is released")
        return None
    return {
        "status": response.status_code,
        "body": response.content,
        "content_type": response.get("Content-Type", "application/octet-stream"),
        "headers": {
            name: value
            for name, value in response.headers.items()
            if name.lower() not in _UNSTORED_HEADERS
        },
    }


def _replay(stored: Replayed) -> HttpResponse:
    response = HttpResponse(stored.body, status=stored.status, content_type=stored.content_type)
    for name, value in stored.headers.items():
        response[name] = value
    response["Idempotent-Replayed"] = "true"
    return response


def _release(records: IdempotencyRecords, key: str, locked_at: datetime) -> None:
    try:
        records.release(key, locked_at=locked_at)
    except DatabaseError:
        # The database is failing too: the lock simply expires after lock_timeout.
        log.warning("could not release idempotency key %r", key, exc_info=True)


def _answer_for(exc: BaseException) -> Answer | None:
    """The answer `recoup.receiver` gives to an error, or None for a bug (500)."""
    if isinstance(exc, ProviderUnavailable):
        return _unavailable("provider-unavailable", str(exc) or "the provider is down")
    if isinstance(exc, StorageError | DatabaseError):
        return _unavailable("storage-unavailable", str(exc))
    if isinstance(exc, RecoupError) and 400 <= exc.http_status < 500:
        error = exc if isinstance(exc, InvalidInput) else None
        return problem(HTTPStatus(exc.http_status), "refused", str(exc), error)
    return None


def _unavailable(slug: str, detail: str) -> Answer:
    return problem(
        HTTPStatus.SERVICE_UNAVAILABLE, slug, detail, retry_after=UNAVAILABLE_RETRY_AFTER
    )


def _secrets(setting: str) -> tuple[str, ...]:
    value = getattr(settings, setting, None)
    if not value:
        raise ImproperlyConfigured(f"{setting}: set it to the whsec_… secret Recoup signs with")
    try:
        return check_secrets(value)
    except InvalidInput as exc:
        raise ImproperlyConfigured(f"{setting}: {exc.allowed}") from None


def _django(answer: Answer) -> HttpResponse:
    """A framework-free answer of `recoup.receiver` as a Django response."""
    response = HttpResponse(answer.body, status=answer.status)
    for name, value in answer.headers.items():
        response[name] = value
    return response


__all__ = [
    "DEFAULT_SECRET_SETTING",
    "RETRY_LATER",
    "Delivery",
    "delivery",
    "idempotent_webhook",
    "not_final",
]
