"""`@idempotent_webhook` on a view of the billing app, on SQLite and PostgreSQL: signatures
refused, one run per delivery, the stored answer replayed, in-flight duplicates refused, and
what is and is not stored."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory, override_settings

from recoup.contrib.django import delivery, idempotent_webhook
from recoup.contrib.django.models import IdempotencyRecord
from recoup.jobs.signing import new_signing_secret, signature_headers
from recoup.receiver import body_fingerprint
from recoup.timekeeping.clock import VirtualClock
from tests.contrib_django.billing import views
from tests.contrib_django.billing.models import Delivered

from .conftest import NOW, deliver, in_background, in_threads

pytestmark = pytest.mark.usefixtures("clock")
EVENT = "/hooks/event"


def problem(response: Any) -> dict[str, Any]:
    assert response["Content-Type"] == "application/problem+json"
    found: dict[str, Any] = json.loads(response.content)
    return found


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"secret": new_signing_secret()}, "no v1 signature matches"),
        ({"at": NOW - timedelta(minutes=6)}, "too old"),
        ({"at": NOW + timedelta(minutes=6)}, "too far in the future"),
        ({"headers": {"webhook-signature": "v1,AAAA"}}, "no v1 signature matches"),
        ({"headers": {"webhook-timestamp": "yesterday"}}, "not integer Unix seconds"),
    ],
    ids=["another secret", "stale", "from the future", "forged", "malformed timestamp"],
)
def test_a_delivery_whose_signature_fails_is_refused_401_and_runs_nothing(
    database: str, client: Client, change: dict[str, Any], expected: str
) -> None:
    response = deliver(client, EVENT, {"n": 1}, **change)
    assert response.status_code == 401
    assert expected in problem(response)["detail"]
    assert Delivered.objects.count() == 0 and IdempotencyRecord.objects.count() == 0


def test_a_body_changed_after_signing_is_refused(database: str, client: Client) -> None:
    # Signed for one body, sent with another: the signature covers the exact bytes.
    signed = signature_headers(
        secret=settings.RECOUP_SIGNING_SECRET, message_id="m", timestamp=NOW, body='{"amount": 1}'
    )
    response = client.post(
        EVENT, data=b'{"amount": 1000}', content_type="application/json", headers=signed
    )
    assert response.status_code == 401
    assert Delivered.objects.count() == 0


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_delivery_without_a_signature_header_is_refused_naming_it(
    database: str, client: Client, missing: str
) -> None:
    signed = signature_headers(
        secret=settings.RECOUP_SIGNING_SECRET, message_id="m", timestamp=NOW, body="{}"
    )
    del signed[missing]
    response = client.post(EVENT, data=b"{}", content_type="application/json", headers=signed)
    assert response.status_code == 401
    assert problem(response)["detail"] == f"{missing}: the header is missing"


def test_only_post_is_allowed(database: str, client: Client) -> None:
    response = client.get(EVENT)
    assert response.status_code == 405 and response["Allow"] == "POST"


def test_a_valid_delivery_runs_the_view_once_and_a_replay_returns_the_stored_answer(
    database: str, client: Client
) -> None:
    first = deliver(client, EVENT, {"n": 1}, message_id="msg_a")
    assert first.status_code == 201
    assert json.loads(first.content)["key"] == "msg_a"  # no Idempotency-Key: the webhook-id
    again = deliver(client, EVENT, {"n": 1}, message_id="msg_a")
    assert again.status_code == 201
    assert again.content == first.content
    assert again["Location"] == first["Location"]  # headers are stored with the answer
    assert again["Content-Type"] == "application/json"
    assert again["Idempotent-Replayed"] == "true" and not first.has_header("Idempotent-Replayed")
    assert Delivered.objects.count() == 1
    record = IdempotencyRecord.objects.get()
    assert (record.key, record.status, record.locked_at) == ("msg_a", 201, None)


def test_the_idempotency_key_header_is_the_key_when_given(database: str, client: Client) -> None:
    # Recoup sends Idempotency-Key: retry:{invoice}:{n}; a retry is signed anew (another
    # webhook-timestamp) but keeps its key, and must not run the view again.
    first = deliver(client, EVENT, {"n": 1}, message_id="msg_a", key='"retry:inv_1:2"')
    later = NOW + timedelta(seconds=30)
    retry = deliver(client, EVENT, {"n": 1}, message_id="msg_b", key="retry:inv_1:2", at=later)
    assert json.loads(first.content)["key"] == "retry:inv_1:2"
    assert retry.content == first.content and retry["Idempotent-Replayed"] == "true"
    assert Delivered.objects.count() == 1


def test_the_same_key_with_another_body_is_422(database: str, client: Client) -> None:
    deliver(client, EVENT, {"n": 1}, message_id="msg_a")
    response = deliver(client, EVENT, {"n": 2}, message_id="msg_a")
    assert response.status_code == 422
    assert "first used with another body" in problem(response)["detail"]
    # The same fields in another order and spacing are the same body.
    same = deliver(client, EVENT, b'{ "n" : 1 }', message_id="msg_a")
    assert same.status_code == 201 and same["Idempotent-Replayed"] == "true"
    assert Delivered.objects.count() == 1


@pytest.mark.parametrize(
    ("then", "status"),
    [("fail", 503), ("busy", 429), ("not_final", 200)],
    ids=["5xx", "try later", "marked not final"],
)
def test_an_answer_that_is_not_final_is_sent_but_not_stored(
    database: str, client: Client, then: str, status: int
) -> None:
    first = deliver(client, EVENT, {"then": then}, message_id="msg_a")
    second = deliver(client, EVENT, {"then": then}, message_id="msg_a")
    assert first.status_code == second.status_code == status
    assert not second.has_header("Idempotent-Replayed")
    # The view ran both times, and its writes were kept (they committed with the answer).
    assert Delivered.objects.count() == 2
    assert IdempotencyRecord.objects.count() == 0  # the key was released


def test_a_view_that_raises_rolls_back_releases_the_key_and_answers_500(
    database: str, client: Client
) -> None:
    response = deliver(client, EVENT, {"then": "raise"}, message_id="msg_a")
    assert response.status_code == 500
    assert Delivered.objects.count() == 0  # its write was rolled back
    assert IdempotencyRecord.objects.count() == 0  # the sender's retry runs afresh
    assert deliver(client, EVENT, {"then": "ok"}, message_id="msg_b").status_code == 201


def test_invalid_input_raised_by_the_view_is_422_naming_the_field(
    database: str, client: Client
) -> None:
    response = deliver(client, EVENT, {"then": "invalid", "amount": -1}, message_id="msg_a")
    assert response.status_code == 422
    body = problem(response)
    assert body["errors"] == [{"field": "amount", "message": "expected a positive integer"}]
    assert IdempotencyRecord.objects.count() == 0 and Delivered.objects.count() == 0


@pytest.mark.parametrize(
    "key",
    ["has space", "x" * 256, "ünïcode"],
    ids=["space", "too long", "not ascii"],
)
def test_an_idempotency_key_that_is_not_a_key_is_400(
    database: str, client: Client, key: str
) -> None:
    response = deliver(client, EVENT, {"n": 1}, key=key)
    assert response.status_code == 400
    assert problem(response)["errors"][0]["field"] == "Idempotency-Key"
    assert Delivered.objects.count() == 0


def test_a_delivery_in_flight_is_409_and_a_dead_one_is_taken_over_after_the_lock_timeout(
    database: str, client: Client, clock: VirtualClock
) -> None:
    # A request that claimed the key and died: its record stays locked.
    fingerprint = body_fingerprint(json.dumps({"n": 1}).encode())
    IdempotencyRecord.objects.create(
        key="msg_a", fingerprint=fingerprint, created_at=NOW, locked_at=NOW
    )
    clock.advance(timedelta(seconds=89))
    busy = deliver(client, EVENT, {"n": 1}, message_id="msg_a", at=clock.now())
    assert busy.status_code == 409 and busy["Retry-After"] == "5"
    assert Delivered.objects.count() == 0
    clock.advance(timedelta(seconds=1))  # 90 s: the default lock timeout
    taken = deliver(client, EVENT, {"n": 1}, message_id="msg_a", at=clock.now())
    assert taken.status_code == 201
    assert IdempotencyRecord.objects.get().status == 201


@pytest.mark.real_transactions
def test_a_duplicate_of_a_delivery_in_flight_never_runs_the_view_again(
    database: str, client: Client
) -> None:
    """The first delivery holds its view open; duplicates sent meanwhile get 409 at once on
    PostgreSQL (the claim committed before the view ran), and wait for the first to finish
    on SQLite (the view's transaction holds the write lock), then get its answer."""
    body = {"then": "wait"}
    held = in_background(lambda: deliver(Client(), EVENT, body, message_id="msg_a"))
    assert views.entered.wait(timeout=30)
    duplicates = [
        in_background(lambda: deliver(Client(), EVENT, body, message_id="msg_a")) for _ in range(3)
    ]
    if database == "postgres":
        answered = [d() for d in duplicates]  # before the first is released
        assert [d.status_code for d in answered] == [409, 409, 409]
        assert all(d["Retry-After"] == "5" for d in answered)
    views.release.set()
    first = held()
    assert first.status_code == 201
    if database == "default":
        answered = [d() for d in duplicates]
        assert all(d.content == first.content for d in answered)
        assert all(d["Idempotent-Replayed"] == "true" for d in answered)
    replay = deliver(client, EVENT, body, message_id="msg_a")
    assert replay.content == first.content and replay["Idempotent-Replayed"] == "true"
    assert Delivered.objects.count() == 1


@pytest.mark.real_transactions
def test_simultaneous_duplicates_run_the_view_once(database: str) -> None:
    # All at once, through the race on the key's row: one runs, the others get 409 or, once
    # it completed, its answer.
    answers = in_threads(
        [lambda: deliver(Client(), EVENT, {"n": 1}, message_id="msg_a") for _ in range(6)]
    )
    assert sorted({a.status_code for a in answers}) in ([201], [201, 409])
    assert len({a.content for a in answers if a.status_code == 201}) == 1
    assert Delivered.objects.count() == 1


def test_the_view_reads_the_verified_delivery(database: str, client: Client) -> None:
    deliver(client, EVENT, {"n": 1}, message_id="msg_a", key="evt_9")
    row = Delivered.objects.get()
    assert (row.message_id, row.key) == ("msg_a", "evt_9")


def test_delivery_outside_the_decorator_is_a_lookup_error() -> None:
    with pytest.raises(LookupError):
        delivery(HttpRequest())


def test_an_async_view_is_refused_when_decorated() -> None:
    async def view(request: HttpRequest) -> HttpResponse:
        return HttpResponse()

    with pytest.raises(TypeError, match="synchronous view"):
        idempotent_webhook(view)


@pytest.mark.parametrize("value", [None, "whsec_not base64!"], ids=["unset", "malformed"])
def test_a_missing_or_malformed_secret_setting_is_a_configuration_error(
    value: str | None,
) -> None:
    view = idempotent_webhook(clock=VirtualClock(NOW))(lambda request: HttpResponse())
    request = RequestFactory().post("/", data=b"{}", content_type="application/json")
    with override_settings(RECOUP_SIGNING_SECRET=value), pytest.raises(ImproperlyConfigured):
        view(request)


def test_a_secret_setting_may_hold_several_secrets_while_rotating(
    database: str, client: Client
) -> None:
    old, new = new_signing_secret(), new_signing_secret()
    with override_settings(RECOUP_SIGNING_SECRET=[new, old]):
        assert deliver(client, EVENT, {"n": 1}, secret=old, message_id="a").status_code == 201
        assert deliver(client, EVENT, {"n": 1}, secret=new, message_id="b").status_code == 201
