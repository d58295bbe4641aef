"""The official `qstash` SDK's schedules against Recoup's QStash-compatible API (each backend):
`Upstash-Cron` becomes a Recoup cron schedule (in UTC, or the zone of a `CRON_TZ=` prefix),
read, listed, paused, resumed and deleted through the SDK; its occurrences are delivered the
QStash way, signed and naming their schedule."""

from __future__ import annotations

from datetime import timedelta

import pytest
from qstash import Receiver
from qstash.errors import QStashError

from recoup.jobs.schedules.model import CronRule
from tests.api.qstash_support import START, Destination, Served, destination, served

__all__ = ["destination", "served"]  # fixtures

URL = "http://127.0.0.1:9/hooks/nightly"  # never called: no worker runs in these tests


def test_a_schedule_is_created_read_listed_paused_resumed_and_deleted(served: Served) -> None:
    schedules = served.client.schedule
    made = schedules.create(destination=URL, cron="*/5 * * * *", body="tick", retries=1)
    stored = served.scheduler.get_schedule(made, tenant=served.tenant)
    assert stored.rule == CronRule(expression="*/5 * * * *", timezone="UTC")
    assert stored.retry.max_attempts == 2

    read = schedules.get(made)
    assert (read.destination, read.cron, read.body, read.retries) == (URL, "*/5 * * * *", "tick", 1)
    assert read.next_schedule_time == int((START + timedelta(minutes=5)).timestamp() * 1000)
    assert [s.schedule_id for s in schedules.list()] == [made]

    schedules.pause(made)
    assert schedules.get(made).paused is True
    schedules.resume(made)
    assert schedules.get(made).paused is False

    schedules.delete(made)
    assert schedules.list() == []
    with pytest.raises(QStashError, match="404"):
        schedules.get(made)
    with pytest.raises(QStashError, match=r"400.*Upstash-Schedule-Id.*deleted schedule"):
        schedules.create(destination=URL, cron="*/5 * * * *", schedule_id=made)


def test_cron_tz_names_the_zone_and_a_given_schedule_id_is_kept(served: Served) -> None:
    made = served.client.schedule.create(
        destination=URL, cron="CRON_TZ=Europe/Paris 0 9 * * 1-5", schedule_id="weekday-report"
    )
    assert made == "weekday-report"
    stored = served.scheduler.get_schedule(made, tenant=served.tenant)
    assert stored.rule == CronRule(expression="0 9 * * 1-5", timezone="Europe/Paris")
    assert served.client.schedule.get(made).cron == "CRON_TZ=Europe/Paris 0 9 * * 1-5"


def test_bad_cron_and_updates_of_a_schedule_are_refused_by_name(served: Served) -> None:
    create = served.client.schedule.create
    with pytest.raises(QStashError, match=r"400.*Upstash-Cron.*61 \* \* \* \*"):
        create(destination=URL, cron="61 * * * *")
    with pytest.raises(QStashError, match=r"400.*Upstash-Cron.*Mars/Olympus"):
        create(destination=URL, cron="CRON_TZ=Mars/Olympus 0 9 * * *")
    create(destination=URL, cron="0 * * * *", schedule_id="hourly")
    with pytest.raises(QStashError, match=r"400.*Upstash-Schedule-Id.*delete it and create"):
        create(destination=URL, cron="0 * * * *", schedule_id="hourly")
    with pytest.raises(QStashError, match=r"400.*Upstash-Delay.*per schedule occurrence"):
        create(destination=URL, cron="0 * * * *", delay=30)


def test_an_occurrence_is_delivered_signed_and_names_its_schedule(
    served: Served, destination: Destination
) -> None:
    keys = served.client.signing_key.get()
    destination.receiver = Receiver(current_signing_key=keys.current, next_signing_key=keys.next)
    made = served.client.schedule.create(
        destination=destination.url, cron="*/5 * * * *", body="tick", headers={"X-Kind": "cron"}
    )
    served.clock.advance(timedelta(minutes=5))
    assert served.deliver() == 1

    [delivery] = destination.deliveries
    assert delivery.verified, delivery.error
    assert (delivery.body, delivery.headers["x-kind"]) == ("tick", "cron")
    assert delivery.headers["upstash-schedule-id"] == made
    message = served.client.message.get(delivery.headers["upstash-message-id"])
    assert message.schedule_id == made
