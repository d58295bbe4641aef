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
from decimal import Decimal
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


def stored_job(values: Sequence[Any], instant: Callable[[Any], datetime]) -> Job:
    """The job a row of `INSERT_COLUMNS` `values` (`JobEncoder.row`) reads back as, decoded as
    the store decodes it; the JSON columns as jsonb reads them back (`as_jsonb_reads`), so an
    answer built from it is the one a read of the row gives."""
    # Decoded, as psycopg hands jsonb over (the row decoder takes either), not written out
    # again for the decoder to parse a second time.
    read = [
        as_jsonb_reads(json.loads(text)) if isinstance(text, str) else text
        for text in job_rows.inserted_json(values)
    ]
    return row_decoding.job_from_row(job_rows.inserted_row(values, read), instant)


def as_jsonb_reads(value: Any) -> Any:
    """A JSON value as PostgreSQL's jsonb gives it back: an object's keys sorted by length,
    then bytewise (`lengthCompareJsonbString` in src/backend/utils/adt/jsonb_util.c), and a
    number written with a positive exponent (Python writes floats from 1e16 so, every one of
    them whole) as the integer jsonb's numeric makes of it."""
    if isinstance(value, dict):
        ordered = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return {k: as_jsonb_reads(value[k]) for k in ordered}
    if isinstance(value, list):
        return [as_jsonb_reads(item) for item in value]
    if isinstance(value, float):
        written = repr(value)  # as `json` writes it
        if "e+" in written:
            return int(Decimal(written))  # the decimal written, not the binary float's value
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
