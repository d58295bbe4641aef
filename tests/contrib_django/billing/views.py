"""The billing app's webhook views under `@idempotent_webhook`: one that records each run and
then does what the delivery's body asks (answer, fail, raise, wait), so the tests can see what
the decorator stores, replays, releases and rolls back."""

from __future__ import annotations

import json
import threading
from datetime import datetime

from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse

from recoup.contrib.django import delivery, idempotent_webhook, not_final
from recoup.errors import InvalidInput
from recoup.timekeeping.clock import VirtualClock
from tests.contrib_django.billing.models import Delivered


class TestClock:
    """The decorators' clock: the running test's virtual clock (set by a fixture)."""

    def __init__(self) -> None:
        self.current: VirtualClock | None = None

    def now(self) -> datetime:
        if self.current is None:
            raise RuntimeError("no clock: use the `clock` fixture")
        return self.current.now()


CLOCK = TestClock()
# A delivery asking to "wait" holds its view here until the test sets `release`.
entered = threading.Event()
release = threading.Event()


@idempotent_webhook(clock=CLOCK)
def record_event(request: HttpRequest) -> HttpResponseBase:
    body = json.loads(request.body)
    found = delivery(request)
    row = Delivered.objects.create(message_id=found.message_id, key=found.key, payload=body)
    match body.get("then", "ok"):
        case "ok":
            response = JsonResponse({"run": row.pk, "key": found.key}, status=201)
            response["Location"] = f"/deliveries/{row.pk}"
            return response
        case "fail":
            return JsonResponse({"error": "try later"}, status=503)
        case "busy":
            return JsonResponse({"error": "busy"}, status=429)
        case "not_final":
            return not_final(JsonResponse({"run": row.pk, "final": False}))
        case "raise":
            raise RuntimeError("the view failed")
        case "invalid":
            raise InvalidInput("amount", body.get("amount"), "expected a positive integer")
        case "wait":
            entered.set()
            release.wait(timeout=30)
            return JsonResponse({"run": row.pk}, status=201)
        case other:
            return HttpResponse(f"unknown: {other}", status=400, content_type="text/plain")
