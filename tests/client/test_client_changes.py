"""The Python client's metadata, its list filters, and its PATCH calls, against a real server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recoup.client import Client, ConflictError
from tests.api.conftest import TARGET, Api
from tests.storage.test_store_contract import claim


def test_jobs_carry_metadata_filter_by_it_and_change(api: Api) -> None:
    with Client(api.url, api.tenant().token) as recoup:
        a = recoup.create_job(TARGET, delay_seconds=3600, metadata={"order": "o_1"})
        recoup.create_job(TARGET, delay_seconds=3600, metadata={"order": "o_2"})
        assert a.metadata == {"order": "o_1"}
        assert [j.id for j in recoup.list_jobs(metadata={"order": "o_1"}).jobs] == [a.id]
        assert [j.id for j in recoup.iter_jobs(metadata={"order": "o_1"})] == [a.id]
        run_at = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
        changed = recoup.update_job(
            a.id,
            run_at=run_at,
            name="renamed",
            metadata={"order": None, "note": "n"},
            target={"url": TARGET, "method": "PUT"},
        )
        assert changed.run_at == run_at and changed.name == "renamed"
        assert changed.metadata == {"note": "n"} and changed.target.method == "PUT"
        assert recoup.update_job(a.id, name=None).name is None


def test_changing_a_started_job_raises_a_conflict_naming_its_state(api: Api) -> None:
    with Client(api.url, api.tenant().token) as recoup:
        job = recoup.create_job(TARGET, delay_seconds=0)
        claim(api.store, now=datetime.now(UTC) + timedelta(seconds=1))
        with pytest.raises(ConflictError, match="running"):
            recoup.update_job(job.id, name="late")


def test_schedules_carry_metadata_and_a_window_and_change(api: Api) -> None:
    with Client(api.url, api.tenant().token) as recoup:
        start = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
        s = recoup.create_schedule(
            TARGET,
            cron="0 9 * * *",
            timezone="Europe/Paris",
            metadata={"team": "ops"},
            start_at=start,
            end_at=start + timedelta(days=7),
        )
        assert s.start_at == start and s.metadata == {"team": "ops"}
        recoup.create_schedule(TARGET, cron="0 9 * * *", timezone="UTC", name="other")
        assert [x.id for x in recoup.list_schedules(metadata={"team": "ops"})] == [s.id]
        changed = recoup.update_schedule(
            s.id, cron="0 10 * * *", end_at=None, metadata={"team": "billing"}
        )
        assert changed.cron == "0 10 * * *" and changed.end_at is None
        assert changed.metadata == {"team": "billing"}
        ended = recoup.update_schedule(s.id, end_at=datetime(2020, 1, 1, tzinfo=UTC), start_at=None)
        assert ended.state == "ended"
        assert [x.id for x in recoup.list_schedules(state="ended")] == [s.id]
