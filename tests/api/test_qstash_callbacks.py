"""The official `qstash` SDK's callbacks and DLQ against Recoup's QStash-compatible API (a real
server on a free port, each backend, a worker on a virtual clock): `callback` and
`failure_callback` on publish and on schedules are reported once, in QStash's callback body,
signed with `Upstash-Signature` that the SDK's `Receiver` verifies; never per retried attempt;
a message whose retries are spent is in the DLQ (`client.dlq.list/get/delete/delete_many`)."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
from qstash import Receiver
from qstash.errors import QStashError

from recoup.jobs.ssrf import SsrfGuard
from tests.api.qstash_support import Destination, Served, destination, served

__all__ = ["destination", "served"]  # fixtures

REFUSED = "http://127.0.0.1:9/hooks/billing"  # nothing listens: every attempt is retried


def verifying(served: Served, destination: Destination) -> Destination:
    keys = served.client.signing_key.get()
    destination.receiver = Receiver(current_signing_key=keys.current, next_signing_key=keys.next)
    return destination


def reports(destination: Destination, path: str) -> list[dict[str, Any]]:
    found = []
    for delivery in destination.deliveries:
        if delivery.path == path:
            assert delivery.verified, delivery.error  # the SDK's Receiver verified it
            assert delivery.method == "POST"
            found.append(json.loads(delivery.body))
    return found


def decoded(text: str) -> str:
    return base64.b64decode(text).decode()


def test_a_delivered_message_is_reported_to_its_callback_in_qstash_shape(
    served: Served, destination: Destination
) -> None:
    base = verifying(served, destination).url.removesuffix("/hook")
    published = served.client.message.publish_json(
        url=destination.url,
        body={"invoice": "in_1"},
        headers={"X-Trace": "abc"},
        retries=2,
        callback=f"{base}/done",
        failure_callback=f"{base}/failed",
    )
    message = served.client.message.get(published.message_id)
    assert message.callback == f"{base}/done"
    assert message.failure_callback == f"{base}/failed"
    served.deliver()
    (report,) = reports(destination, "/done")
    assert reports(destination, "/failed") == []
    assert report["status"] == 200
    assert report["sourceMessageId"] == published.message_id
    assert report["url"] == destination.url and report["method"] == "POST"
    assert report["retried"] == 0 and report["maxRetries"] == 2
    assert json.loads(decoded(report["sourceBody"])) == {"invoice": "in_1"}
    assert report["sourceHeader"]["x-trace"] == ["abc"]
    assert decoded(report["body"]) == ""  # the destination answered an empty body
    assert report["header"] == {}  # Recoup keeps no response headers
    assert isinstance(report["createdAt"], int) and isinstance(report["notBefore"], int)
    assert "dlqId" not in report
    served.clock.advance(timedelta(days=1))
    served.deliver()
    assert len(reports(destination, "/done")) == 1  # once


def test_spent_retries_are_reported_once_to_the_failure_callback(
    served: Served, destination: Destination
) -> None:
    base = verifying(served, destination).url.removesuffix("/hook")
    published = served.client.message.publish(
        url=REFUSED, body="charge", retries=2, failure_callback=f"{base}/failed"
    )
    served.deliver()
    for _ in range(2):
        assert reports(destination, "/failed") == []  # a retried attempt is not an end
        served.clock.advance(timedelta(days=1))  # past QStash's backoff (capped at a day)
        served.deliver()
    (report,) = reports(destination, "/failed")
    assert report["sourceMessageId"] == published.message_id
    assert report["retried"] == 2 and report["maxRetries"] == 2  # retries exhausted
    assert report["status"] is None  # no answer ever came
    assert report["dlqId"] == published.message_id
    assert decoded(report["sourceBody"]) == "charge"


def test_a_cancelled_message_reports_nothing(served: Served, destination: Destination) -> None:
    base = verifying(served, destination).url.removesuffix("/hook")
    published = served.client.message.publish(
        url=destination.url,
        body="x",
        delay="1h",
        callback=f"{base}/done",
        failure_callback=f"{base}/failed",
    )
    served.client.message.cancel(published.message_id)
    served.clock.advance(timedelta(hours=2))
    served.deliver()
    assert destination.deliveries == []


def test_a_schedule_occurrences_report_to_the_schedule_callbacks(
    served: Served, destination: Destination
) -> None:
    base = verifying(served, destination).url.removesuffix("/hook")
    schedule_id = served.client.schedule.create(
        destination=destination.url,
        cron="* * * * *",
        body="tick",
        callback=f"{base}/done",
        failure_callback=f"{base}/failed",
    )
    schedule = served.client.schedule.get(schedule_id)
    assert schedule.callback == f"{base}/done"
    assert schedule.failure_callback == f"{base}/failed"
    served.scheduler.materialise()
    served.clock.advance(timedelta(minutes=1))
    served.deliver()
    (report,) = reports(destination, "/done")
    assert report["scheduleId"] == schedule_id and decoded(report["sourceBody"]) == "tick"


def test_the_dlq_lists_reads_and_deletes_messages_whose_retries_are_spent(
    served: Served, destination: Destination
) -> None:
    dead = [
        served.client.message.publish(url=REFUSED, body=f"dead-{n}", retries=0).message_id
        for n in range(3)
    ]
    served.client.message.publish(url=verifying(served, destination).url, body="alive")
    served.deliver()
    listed: list[str] = []
    cursor = None
    while True:
        page = served.client.dlq.list(cursor=cursor, count=2)
        listed += [m.message_id for m in page.messages]
        assert all(m.dlq_id == m.message_id for m in page.messages)
        cursor = page.cursor
        if cursor is None:
            break
    assert sorted(listed) == sorted(dead)
    entry = served.client.dlq.get(dead[0])
    assert entry.body == "dead-0" and entry.url == REFUSED
    assert entry.response_status == 0  # no answer: the connection was refused
    served.client.dlq.delete(dead[0])
    with pytest.raises(QStashError, match="DLQ"):
        served.client.dlq.get(dead[0])
    assert served.client.dlq.delete_many([dead[1], dead[2], "no-such-id"]) == 2
    assert served.client.dlq.list().messages == []


def test_callback_headers_are_checked_and_refused_by_name(served: Served) -> None:
    auth = {"Authorization": f"Bearer {served.token}"}
    publish = f"{served.url}/qstash/v2/publish/https://93.184.216.34/hook"
    not_http = httpx.post(publish, headers={**auth, "Upstash-Callback": "ftp://x/y"}, content="x")
    assert not_http.status_code == 400
    assert not_http.json()["errors"][0]["field"] == "Upstash-Callback"
    forwarded = httpx.post(
        publish,
        headers={
            **auth,
            "Upstash-Callback": "https://93.184.216.34/cb",
            "Upstash-Callback-X-Trace": "1",
        },
        content="x",
    )
    assert forwarded.status_code == 400
    assert "forwarded to a callback" in forwarded.json()["detail"]
    served.scheduler.ssrf = SsrfGuard()  # private addresses refused from here on
    refused = httpx.post(
        publish,
        headers={**auth, "Upstash-Failure-Callback": "http://10.0.0.1/failed"},
        content="x",
    )
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "Upstash-Failure-Callback"
    assert "SSRF" in refused.json()["detail"]
