"""QStash's TypeScript SDK (`@upstash/qstash` 2.12 from npm, unchanged, run by the machine's
Node.js) against Recoup's /qstash on a loopback server (each backend): publish with a delay, a
not-before, retries, callbacks, deduplication and flow control; schedules created, read,
listed, paused, resumed and deleted; messages read and cancelled one, many and all at a time;
the DLQ listed and emptied; and its `Receiver` verifying a delivery with the keys of
`GET /v2/keys`. Every call goes through with the `Upstash-Telemetry-*` headers the SDK always
sends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from recoup.jobs.flow import FlowLimits
from recoup.jobs.model import HttpTarget, JobState
from recoup.jobs.schedules.model import CronRule
from tests.api.qstash_js_support import TypeScriptSdk, installed_sdk
from tests.api.qstash_support import START, Destination, Served, destination, served

__all__ = ["destination", "served"]  # fixtures

URL = "http://127.0.0.1:9/hooks/billing"  # never called unless a test runs the worker
CALLBACK = "http://127.0.0.1:9/hooks/done"
FAILURE_CALLBACK = "http://127.0.0.1:9/hooks/failed"


@pytest.fixture(scope="session")
def sdk_modules() -> Path:
    return installed_sdk()


@pytest.fixture
def sdk(served: Served, sdk_modules: Path) -> Iterator[TypeScriptSdk]:
    yield TypeScriptSdk(sdk_modules, f"{served.url}/qstash", served.token)


def test_publish_takes_delay_not_before_retries_callbacks_and_headers(
    served: Served, sdk: TypeScriptSdk
) -> None:
    at = int((START + timedelta(days=2)).timestamp())
    delayed, not_before = sdk.calls(
        (
            "publish",
            [
                {
                    "url": URL + "?plan=pro",
                    "body": '{"invoice":"in_1"}',
                    "method": "PUT",
                    "headers": {"Content-Type": "application/json", "X-Trace": "abc"},
                    "delay": "1h30m",
                    "retries": 2,
                    "timeout": 45,
                    "callback": CALLBACK,
                    "failureCallback": FAILURE_CALLBACK,
                }
            ],
        ),
        ("publish", [{"url": URL, "body": "x", "notBefore": at, "delay": 60}]),
    )
    job = served.scheduler.get(delayed.value["messageId"], tenant=served.tenant)
    assert job.run_at == START + timedelta(hours=1, minutes=30)
    assert job.retry.max_attempts == 3  # two retries after the first attempt
    assert job.timeout == timedelta(seconds=45)
    assert job.target == HttpTarget(
        url=URL + "?plan=pro",
        method="PUT",
        headers={"x-trace": "abc", "Content-Type": "application/json"},
        body='{"invoice":"in_1"}',
        delivery="qstash",
        callback=CALLBACK,
        failure_callback=FAILURE_CALLBACK,
    )
    later = served.scheduler.get(not_before.value["messageId"], tenant=served.tenant)
    assert later.run_at == START + timedelta(days=2)  # not-before wins over the delay


def test_deduplication_by_id_and_by_content_answers_the_first_message(
    served: Served, sdk: TypeScriptSdk
) -> None:
    answers = sdk.calls(
        ("publish", [{"url": URL, "body": "a", "deduplicationId": "order-7"}]),
        ("publish", [{"url": URL, "body": "b", "deduplicationId": "order-7"}]),
        ("publish", [{"url": URL, "body": "a", "deduplicationId": "order-8"}]),
        ("publish", [{"url": URL, "body": "same", "contentBasedDeduplication": True}]),
        ("publish", [{"url": URL, "body": "same", "contentBasedDeduplication": True}]),
        ("publish", [{"url": URL, "body": "other", "contentBasedDeduplication": True}]),
    )
    first, again, other, by_content, same, changed = (a.value for a in answers)
    assert again == {"messageId": first["messageId"], "deduplicated": True}
    assert other["messageId"] != first["messageId"] and "deduplicated" not in other
    assert same == {"messageId": by_content["messageId"], "deduplicated": True}
    assert changed["messageId"] != by_content["messageId"]


def test_flow_control_is_read_and_bad_values_are_refused_by_name(
    served: Served, sdk: TypeScriptSdk
) -> None:
    limits = {"key": "acct-1", "parallelism": 2, "rate": 3, "period": "1s"}
    limited, no_rate, bad_period = sdk.calls(
        ("publish", [{"url": URL, "body": "x", "flowControl": limits}]),
        ("publish", [{"url": URL, "body": "y", "flowControl": {"key": "acct-2", "rate": 0}}]),
        ("publish", [{"url": URL, "body": "z", "flowControl": {**limits, "period": "1w"}}]),
    )
    job = served.scheduler.get(limited.value["messageId"], tenant=served.tenant)
    assert (job.flow_key, job.flow_parallelism, job.flow_rate) == ("acct-1", 2, 3)
    assert job.flow_period == timedelta(seconds=1)
    message = sdk.call("messages.get", job.id)
    assert (message["flowControlKey"], message["parallelism"], message["rate"]) == ("acct-1", 2, 3)
    assert message["period"] == 1
    assert no_rate.status == 400 and "Upstash-Flow-Control-Value" in (no_rate.error or "")
    assert bad_period.status == 400 and "'1w'" in (bad_period.error or "")


def test_schedules_are_created_read_listed_paused_resumed_and_deleted(
    served: Served, sdk: TypeScriptSdk
) -> None:
    made = sdk.call(
        "schedules.create",
        {
            "destination": URL,
            "cron": "*/5 * * * *",
            "body": "tick",
            "retries": 1,
            "flowControl": {"key": "nightly", "rate": 2, "period": "1m"},
        },
    )["scheduleId"]
    stored = served.scheduler.get_schedule(made, tenant=served.tenant)
    assert stored.rule == CronRule(expression="*/5 * * * *", timezone="UTC")
    assert stored.retry.max_attempts == 2
    assert stored.flow == FlowLimits(key="nightly", rate=2, period=timedelta(minutes=1))

    read, listed, _, paused, _, resumed, deleted, after, gone = sdk.calls(
        ("schedules.get", [made]),
        ("schedules.list", []),
        ("schedules.pause", [{"schedule": made}]),
        ("schedules.get", [made]),
        ("schedules.resume", [{"schedule": made}]),
        ("schedules.get", [made]),
        ("schedules.delete", [made]),
        ("schedules.list", []),
        ("schedules.get", [made]),
    )
    found = read.value
    assert (found["destination"], found["cron"], found["body"], found["retries"]) == (
        URL,
        "*/5 * * * *",
        "tick",
        1,
    )
    assert (found["flowControlKey"], found["rate"], found["period"]) == ("nightly", 2, 60)
    assert found["nextScheduleTime"] == int((START + timedelta(minutes=5)).timestamp() * 1000)
    assert [s["scheduleId"] for s in listed.value] == [made]
    assert paused.value["isPaused"] is True and resumed.value["isPaused"] is False
    assert deleted.error is None and after.value == []
    assert gone.status == 404
    assert served.scheduler.get_schedule(made, tenant=served.tenant).deleted


def test_messages_are_read_and_cancelled_one_many_and_all(
    served: Served, sdk: TypeScriptSdk
) -> None:
    published = sdk.calls(
        *(("publish", [{"url": URL, "body": str(n), "retries": 4, "delay": 300}]) for n in range(5))
    )
    one, *many = (p.value["messageId"] for p in published)
    read, cancelled_one, cancelled_many, cancelled_all = sdk.calls(
        ("messages.get", [one]),
        ("messages.cancel", [one]),
        ("messages.cancel", [[many[0], many[1], one, "no-such-id"]]),
        ("messages.cancel", [{"all": True}]),
    )
    found = read.value
    assert (found["url"], found["body"], found["method"], found["maxRetries"]) == (
        URL,
        "0",
        "POST",
        4,
    )
    assert found["notBefore"] == int((START + timedelta(minutes=5)).timestamp() * 1000)
    assert cancelled_one.value["messageId"] == one
    assert cancelled_many.value == {"cancelled": 2}
    assert cancelled_all.value == {"cancelled": 2}
    states = {served.scheduler.get(m, tenant=served.tenant).state for m in [one, *many]}
    assert states == {JobState.CANCELLED}


def test_failed_messages_are_listed_in_the_dlq_and_deleted_one_and_many(
    served: Served, sdk: TypeScriptSdk, destination: Destination
) -> None:
    # No receiver at the destination: every delivery is answered 401, and with no retries
    # each message is in the DLQ after its one attempt.
    published = sdk.calls(
        *(("publish", [{"url": destination.url, "body": str(n), "retries": 0}]) for n in range(3))
    )
    ids = [p.value["messageId"] for p in published]
    assert served.deliver() == 3
    listed = sdk.call("dlq.listMessages")
    assert sorted(m["dlqId"] for m in listed["messages"]) == sorted(ids)
    assert {m["responseStatus"] for m in listed["messages"]} == {401}

    one, many, after = sdk.calls(
        ("dlq.delete", [ids[0]]),
        ("dlq.delete", [[ids[1], ids[2], "no-such-id"]]),
        ("dlq.listMessages", []),
    )
    assert one.value == {"deleted": 1} and many.value == {"deleted": 2}
    assert after.value["messages"] == []


def test_the_receiver_verifies_a_delivery_with_the_keys_of_v2_keys(
    served: Served, sdk: TypeScriptSdk, destination: Destination
) -> None:
    published = sdk.call(
        "publishJSON", {"url": destination.url, "body": {"invoice": "in_1"}, "retries": 0}
    )
    served.deliver()
    [delivery] = destination.deliveries
    assert delivery.headers["upstash-message-id"] == published["messageId"]
    signature = delivery.headers["upstash-signature"]
    keys, verified, tampered, elsewhere = sdk.calls(
        ("keys", []),
        ("verify", [{"signature": signature, "body": delivery.body, "url": destination.url}]),
        ("verify", [{"signature": signature, "body": '{"invoice":"in_2"}'}]),
        ("verify", [{"signature": signature, "body": delivery.body, "url": "https://x.test/"}]),
    )
    assert set(keys.value) == {"current", "next"}
    assert verified.value is True
    assert "body hash" in tampered.value
    assert "subject" in elsewhere.value or "sub" in elsewhere.value
