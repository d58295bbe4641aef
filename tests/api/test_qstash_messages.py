"""The official `qstash` SDK, unchanged, against Recoup's QStash-compatible API (a real server on
a free port, each backend): a publish is a Recoup job with the run_at, target and retries the
headers asked for; deduplication answers the first message; forwarded headers reach the
destination; messages are read and cancelled one, many or all at a time; and deliveries carry
an `Upstash-Signature` that the SDK's `Receiver` verifies (and refuses for a tampered body)."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from qstash import Receiver
from qstash.errors import QStashError, SignatureError

from recoup.jobs.model import HttpTarget, JobState
from recoup.jobs.qstash_signing import derived_key
from tests.api.qstash_support import START, Destination, Served, destination, served

__all__ = ["destination", "served"]  # fixtures

URL = "http://127.0.0.1:9/hooks/billing"  # never called: no worker runs in these tests


def test_a_publish_is_a_recoup_job_with_the_asked_target_retries_and_instant(
    served: Served,
) -> None:
    published = served.client.message.publish(
        url=URL + "?plan=pro",
        body='{"invoice":"in_1"}',
        content_type="application/json",
        method="PUT",
        retries=2,
        delay="1h30m",
        timeout=45,
        headers={"X-Trace": "abc"},
    )
    job = served.scheduler.get(published.message_id, tenant=served.tenant)
    assert job.run_at == START + timedelta(hours=1, minutes=30)
    assert job.retry.max_attempts == 3  # two retries after the first attempt
    assert job.timeout == timedelta(seconds=45)
    assert job.target == HttpTarget(
        url=URL + "?plan=pro",
        method="PUT",
        headers={"x-trace": "abc", "Content-Type": "application/json"},
        body='{"invoice":"in_1"}',
        delivery="qstash",
    )
    assert published.deduplicated is False


def test_not_before_sets_the_instant_and_wins_over_a_delay(served: Served) -> None:
    at = int((START + timedelta(days=2)).timestamp())
    published = served.client.message.publish(url=URL, body="x", not_before=at, delay=60)
    assert served.scheduler.get(published.message_id, tenant=served.tenant).run_at == START + (
        timedelta(days=2)
    )


def test_the_same_deduplication_id_answers_the_first_message(served: Served) -> None:
    first = served.client.message.publish(url=URL, body="a", deduplication_id="order-7")
    again = served.client.message.publish(url=URL, body="b", deduplication_id="order-7")
    other = served.client.message.publish(url=URL, body="a", deduplication_id="order-8")
    assert (again.message_id, again.deduplicated) == (first.message_id, True)
    assert other.message_id != first.message_id and other.deduplicated is False


def test_content_based_deduplication_matches_the_same_content_only(served: Served) -> None:
    publish = served.client.message.publish
    first = publish(url=URL, body="same", content_based_deduplication=True)
    again = publish(url=URL, body="same", content_based_deduplication=True)
    changed = publish(url=URL, body="other", content_based_deduplication=True)
    assert again.message_id == first.message_id and again.deduplicated
    assert changed.message_id != first.message_id


def test_messages_are_read_and_cancelled(served: Served) -> None:
    messages = served.client.message
    one = messages.publish(url=URL, body="hello", retries=4, delay=300).message_id
    read = messages.get(one)
    assert (read.url, read.body, read.method, read.max_retries) == (URL, "hello", "POST", 4)
    assert read.not_before == int((START + timedelta(minutes=5)).timestamp() * 1000)

    messages.cancel(one)
    assert served.scheduler.get(one, tenant=served.tenant).state is JobState.CANCELLED

    many = [messages.publish(url=URL, body=str(n), delay=60).message_id for n in range(3)]
    assert messages.cancel_many([many[0], many[1], one, "no-such-id"]) == 2
    assert messages.cancel_all() == 1  # the third
    states = {served.scheduler.get(m, tenant=served.tenant).state for m in many}
    assert states == {JobState.CANCELLED}


def test_a_job_made_through_v1_is_no_message_to_read_or_cancel(served: Served) -> None:
    job = served.scheduler.enqueue(HttpTarget(url=URL), tenant=served.tenant)
    with pytest.raises(QStashError, match="404"):
        served.client.message.get(job.id)
    with pytest.raises(QStashError, match="404"):
        served.client.message.cancel(job.id)
    assert served.scheduler.get(job.id, tenant=served.tenant).state is JobState.SCHEDULED


def test_unsupported_and_invalid_headers_are_refused_by_name(served: Served) -> None:
    publish = served.client.message.publish
    with pytest.raises(QStashError, match=r"400.*Upstash-Callback-X-A.*forwarded to a callback"):
        publish(url=URL, body="x", callback="https://example.com/cb", callback_headers={"X-A": "1"})
    raw = httpx.post(
        f"{served.url}/qstash/v2/publish/{URL}",
        headers={"Authorization": f"Bearer {served.token}", "Upstash-Retries": "many"},
    )
    assert raw.status_code == 400
    assert raw.json()["errors"] == [
        {"field": "Upstash-Retries", "message": "expected an integer 0–99", "value": "many"}
    ]
    with pytest.raises(QStashError, match=r"400.*Upstash-Delay.*'soon'.*30s, 5m"):
        publish(url=URL, body="x", delay="soon")
    with pytest.raises(QStashError, match=r"400.*destination.*URL groups"):
        publish(url_group="my-group", body="x")


def test_a_wrong_token_is_refused(served: Served) -> None:
    answer = httpx.post(
        f"{served.url}/qstash/v2/publish/{URL}", headers={"Authorization": "Bearer nope"}
    )
    assert answer.status_code == 401


def test_deliveries_carry_forwarded_headers_and_a_signature_the_receiver_verifies(
    served: Served, destination: Destination
) -> None:
    keys = served.client.signing_key.get()
    destination.receiver = Receiver(current_signing_key=keys.current, next_signing_key=keys.next)
    published = served.client.message.publish_json(
        url=destination.url, body={"invoice": "in_1"}, headers={"X-Trace": "abc"}
    )
    # An ordinary job to the same destination goes out as before: Standard Webhooks only.
    served.scheduler.enqueue(HttpTarget(url=destination.url + "?plain"), tenant=served.tenant)
    assert served.deliver() == 2

    [plain] = [d for d in destination.deliveries if d.path.endswith("?plain")]
    assert "webhook-signature" in plain.headers and "upstash-signature" not in plain.headers
    [delivery] = [d for d in destination.deliveries if d is not plain]
    assert delivery.verified, delivery.error
    assert delivery.body == '{"invoice": "in_1"}'
    assert delivery.headers["x-trace"] == "abc"
    assert delivery.headers["upstash-message-id"] == published.message_id
    assert delivery.headers["upstash-retried"] == "0"
    assert "webhook-signature" in delivery.headers  # Standard Webhooks too, as every job
    job = served.scheduler.get(published.message_id, tenant=served.tenant)
    assert job.state is JobState.SUCCEEDED

    # The same signature over a tampered body, or presented for another URL, fails.
    receiver = destination.receiver
    signature = delivery.headers["upstash-signature"]
    with pytest.raises(SignatureError, match="body hash"):
        receiver.verify(signature=signature, body='{"invoice": "in_2"}')
    with pytest.raises(SignatureError, match="subject"):
        receiver.verify(signature=signature, body=delivery.body, url="https://evil.example/")
    wrong = Receiver(current_signing_key="sig_wrong", next_signing_key="sig_wrong2")
    with pytest.raises(SignatureError):
        wrong.verify(signature=signature, body=delivery.body)


def test_a_rotation_keeps_deliveries_verifiable_with_the_keys_read_during_its_overlap(
    served: Served, destination: Destination
) -> None:
    before = served.client.signing_key.get()
    tenant = served.store.get_tenant(served.tenant)
    assert tenant is not None
    assert before.current == before.next == derived_key(tenant.signing_secret)
    served.store.replace_signing_secret(
        served.tenant,
        secret="whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY",
        previous_until=START + timedelta(days=3650),
    )
    during = served.client.signing_key.get()
    assert (during.current, during.next) != (before.current, before.next)
    assert during.current == before.current  # still signing with the replaced secret's key
    destination.receiver = Receiver(
        current_signing_key=during.current, next_signing_key=during.next
    )
    served.client.message.publish(url=destination.url, body="after rotation")
    served.deliver()
    assert [d.verified for d in destination.deliveries] == [True]


def test_a_qstash_route_recoup_does_not_offer_is_named_with_the_supported_ones(
    served: Served,
) -> None:
    with pytest.raises(QStashError, match=r"404.*/v2/batch is not supported.*/v2/publish"):
        served.client.message.batch([{"url": URL, "body": "x"}])
    with pytest.raises(QStashError, match=r"404.*/v2/queues is not supported.*/v2/dlq"):
        served.client.queue.list()
