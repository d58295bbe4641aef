"""Creating one job for the HTTP API in one unit, its idempotency key's claim and stored answer
included (`ApiTables.create_job`): what the usual `POST /v1/jobs` costs on each backend.

Both backends decline (`Declined`) what the unit is not sure of, without writing anything: the
token epoch moved (`stale`), the request's key is already held (a replay, a mismatch, a request
in flight), or the job clashes with another (its idempotency key, its name). The caller then
answers the request the general way (`PostContext.run_with_status`), which reads the stored
state and decides as before. So the unit only has to be right about the job it creates.

- PostgreSQL (`postgres/job_creation.py`): one statement in autocommit, one round trip. The
  answer stored under the key is built before the statement from the row the insert writes
  (`stored_job`), since one statement cannot read its own insert back before writing the key.
- SQLite (`sqlite/job_creation.py`): plain statements in one group-commit unit, without the
  savepoints the general path nests around each of its three writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from recoup.jobs.model import Job, NewJob
from recoup.storage import job_rows, row_decoding
from recoup.storage.job_rows import EncodeInstant

CREATED = 201
JSON = "application/json"


@dataclass(frozen=True, kw_only=True, slots=True)
class KeyClaim:
    """The request's `Idempotency-Key` as its row names it."""

    key: str
    fingerprint: str
    method: str
    path: str


@dataclass(frozen=True, kw_only=True)
class JobCreation:
    """One job to create for `job.tenant`, `now` the store's instant of the insert, while the
    token epoch is still `epoch`; with `claim`, under that key, whose stored answer (status 201,
    JSON) is `answer` of the created job."""

    job: NewJob
    now: datetime
    epoch: int
    claim: KeyClaim | None
    answer: Callable[[Job], bytes]


@dataclass(frozen=True, slots=True)
class Created:
    """The job as stored, and its answer (`answer` of it)."""

    job: Job
    body: bytes


@dataclass(frozen=True, slots=True)
class Declined:
    """Nothing written: `stale` when the token epoch moved (read the token again), else the key
    or the job met another's (answer the general way)."""

    stale: bool


CreateJob = Callable[[Any, JobCreation], Created | Declined]  # (the backend's dialect, …)

# A job's columns that the insert does not write: what the schema's defaults give a new job.
_DEFAULTS = {
    "state": "scheduled",
    "attempts": 0,
    "lease_expires_at": None,
    "leased_by": None,
    "last_error": None,
    "finished_at": None,
}
_JSON_COLUMNS = ("target", "payload", "metadata")


def stored_job(values: Sequence[Any], instant: Callable[[Any], datetime]) -> Job:
    """The job a row of `INSERT_COLUMNS` `values` (`JobEncoder.row`) reads back as, decoded as
    the store decodes it; jsonb's object key order (shorter keys first, then bytewise) applied
    to the JSON columns, so an answer built from it is the one a read of the row gives."""
    written = dict(zip(job_rows.INSERT_COLUMNS, values, strict=True))
    for name in _JSON_COLUMNS:
        text = written[name]
        if isinstance(text, str):
            # Decoded, as psycopg hands jsonb over (the row decoder takes either), not written
            # out again for the decoder to parse a second time.
            written[name] = _jsonb_order(json.loads(text))
    row = [written[name] if name in written else _DEFAULTS[name] for name in job_rows.JOB_COLUMNS]
    return row_decoding.job_from_row(row, instant)


def _jsonb_order(value: Any) -> Any:
    # PostgreSQL's jsonb stores an object's keys sorted by length, then bytewise
    # (`lengthCompareJsonbString` in src/backend/utils/adt/jsonb_util.c).
    if isinstance(value, dict):
        ordered = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return {k: _jsonb_order(value[k]) for k in ordered}
    if isinstance(value, list):
        return [_jsonb_order(item) for item in value]
    return value


def encoded_row(job: NewJob, now: datetime, instant: EncodeInstant) -> tuple[Any, ...]:
    return job_rows.JobEncoder(instant).row(job, instant(now))


__all__ = [
    "CREATED",
    "JSON",
    "CreateJob",
    "Created",
    "Declined",
    "JobCreation",
    "KeyClaim",
    "encoded_row",
    "stored_job",
]
