"""PATCH on both backends (migration 0009): a job that has not started, and a schedule's
definition (`recoup.jobs.changes` holds the rules; this module makes each change one
transaction).

- A job: read under a lock a claim must also take (PostgreSQL: the row, `FOR UPDATE`, which
  a claim's `SKIP LOCKED` passes over; SQLite: the write lock), checked, then written by an
  UPDATE that repeats the state check (`state = 'scheduled' AND attempts = 0`).
- A schedule: a compare-and-set on its revision, with the not-yet-started jobs it
  materialised ahead deleted in the same transaction (the materialiser's advance checks the
  revision too, so no occurrence planned from the old definition lands after the change).
"""

from __future__ import annotations

from datetime import datetime

from recoup.errors import Conflict
from recoup.jobs.changes import JobChange
from recoup.jobs.model import NewJob
from recoup.jobs.schedules.model import Schedule
from recoup.jobs.store import JobUpdate
from recoup.storage import job_rows, row_decoding
from recoup.storage.dialect import Dialect


class SqlChangeTables:
    """`update_scheduled_job`, `replace_unstarted_job` and `replace_schedule` over a
    dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._sql = dialect.queries

    def update_scheduled_job(
        self, tenant: str, job_id: str, change: JobChange, *, now: datetime
    ) -> JobUpdate:
        Q = self._sql
        decode = self._dialect.decode_instant
        with self._dialect.write() as conn:
            row = conn.execute(Q["get_job_for_update"], {"tenant": tenant, "id": job_id}).fetchone()
            if row is None:
                return JobUpdate(job=None, changed=False)
            job = row_decoding.job_from_row(row, decode)
            if job.started:
                return JobUpdate(job=job, changed=False)
            new = change.applied_to(job)  # InvalidInput (a metadata limit) rolls back
            if new.name is not None and new.name != job.name:
                live = conn.execute(
                    Q["get_live_job_by_name"], {"tenant": tenant, "name": new.name}
                ).fetchone()
                if live is not None:
                    raise Conflict(f"a live job of tenant {tenant!r} is named {new.name!r}")
            max_attempts, min_s, max_s, jitter = job_rows.retry_values(new.retry)
            updated = conn.execute(
                Q["update_scheduled_job"],
                {
                    "tenant": tenant,
                    "id": job_id,
                    "run_at": self._dialect.encode_instant(new.run_at),
                    "target": job_rows.dumps(job_rows.target_to_dict(new.target)),
                    "name": new.name,
                    "max_attempts": max_attempts,
                    "min_backoff_s": min_s,
                    "max_backoff_s": max_s,
                    "jitter": self._dialect.encode_bool(jitter),
                    "timeout_s": new.timeout.total_seconds(),
                    "metadata": job_rows.dumps(new.metadata),
                    "now": self._dialect.encode_instant(now),
                },
            ).fetchone()
            if updated is None:  # not reachable under the lock; the UPDATE checks regardless
                return JobUpdate(job=job, changed=False)
            if new.run_at != job.run_at:
                self._dialect.wake_workers(conn)  # an earlier run_at: a sleeping worker must see it
        if new.run_at != job.run_at:
            self._dialect.jobs_inserted()
        return JobUpdate(job=row_decoding.job_from_row(updated, decode), changed=True)

    def replace_unstarted_job(
        self, tenant: str, job_id: str, job: NewJob, *, now: datetime
    ) -> JobUpdate:
        """Replace a job that has not started with `job` (on_conflict "replace": everything but
        its id, idempotency key and creation), under the same lock and state check as a PATCH,
        so a claim either finds the replacement or makes this find the job started."""
        Q = self._sql
        decode = self._dialect.decode_instant
        with self._dialect.write() as conn:
            row = conn.execute(Q["get_job_for_update"], {"tenant": tenant, "id": job_id}).fetchone()
            if row is None:
                return JobUpdate(job=None, changed=False)
            current = row_decoding.job_from_row(row, decode)
            if current.started or current.schedule_id is not None:
                return JobUpdate(job=current, changed=False)
            if job.name is not None and job.name != current.name:
                live = conn.execute(
                    Q["get_live_job_by_name"], {"tenant": tenant, "name": job.name}
                ).fetchone()
                if live is not None:
                    raise Conflict(f"a live job of tenant {tenant!r} is named {job.name!r}")
            encode = self._dialect.encode_instant
            values = dict(
                zip(
                    job_rows.INSERT_COLUMNS,
                    job_rows.JobEncoder(encode).row(job, encode(now)),
                    strict=True,
                )
            )
            values["jitter"] = self._dialect.encode_bool(values["jitter"])
            values.update(tenant=tenant, id=job_id, now=encode(now))
            updated = conn.execute(Q["replace_unstarted_job"], values).fetchone()
            if updated is None:  # not reachable under the lock; the UPDATE checks regardless
                return JobUpdate(job=current, changed=False)
            self._dialect.wake_workers(conn)
        self._dialect.jobs_inserted()
        return JobUpdate(job=row_decoding.job_from_row(updated, decode), changed=True)

    def replace_schedule(
        self, schedule: Schedule, *, expected_revision: int, now: datetime
    ) -> Schedule | None:
        Q = self._sql
        encode = self._dialect.encode_instant
        max_attempts, min_s, max_s, jitter = job_rows.retry_values(schedule.retry)
        next_fire_at = schedule.next_fire_at
        params = {
            "tenant": schedule.tenant,
            "id": schedule.id,
            "name": schedule.name,
            "rule": job_rows.dumps(job_rows.rule_to_dict(schedule.rule)),
            "target": job_rows.dumps(job_rows.target_to_dict(schedule.target)),
            "max_attempts": max_attempts,
            "min_backoff_s": min_s,
            "max_backoff_s": max_s,
            "jitter": self._dialect.encode_bool(jitter),
            "timeout_s": schedule.timeout.total_seconds(),
            "missed": schedule.missed.value,
            "paused": self._dialect.encode_bool(schedule.paused),
            "next_fire_at": None if next_fire_at is None else encode(next_fire_at),
            "metadata": job_rows.dumps(schedule.metadata),
            "start_at": None if schedule.start_at is None else encode(schedule.start_at),
            "end_at": None if schedule.end_at is None else encode(schedule.end_at),
            "expected_revision": expected_revision,
            "now": encode(now),
        }
        with self._dialect.write() as conn:
            holder = conn.execute(
                Q["live_schedule_by_name"], {"tenant": schedule.tenant, "name": schedule.name}
            ).fetchone()
            if holder is not None and holder[0] != schedule.id:
                raise Conflict(
                    f"tenant {schedule.tenant!r} already has a schedule named {schedule.name!r}"
                )
            row = conn.execute(Q["replace_schedule"], params).fetchone()
            if row is None:
                return None
            conn.execute(
                Q["delete_pending_occurrences"], {"schedule_id": schedule.id, "now": encode(now)}
            )
        return row_decoding.schedule_from_row(row, self._dialect.decode_instant)


__all__ = ["SqlChangeTables"]
