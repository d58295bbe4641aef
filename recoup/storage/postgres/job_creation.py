"""Creating the API's job on PostgreSQL in one statement, one round trip (see
`recoup.storage.job_creations`): `create_job` for a request without a key, `create_job_keyed`
with its key's row, the answer stored in it built before the statement (`stored_job`)."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg

from recoup.storage import row_decoding
from recoup.storage.job_creations import (
    CREATED,
    JSON,
    Created,
    Declined,
    JobCreation,
    encoded_row,
    stored_job,
)
from recoup.storage.job_rows import aware_utc, inserted_row
from recoup.storage.postgres.dialect import QUERIES, PostgresDialect

# The SQLSTATE of `recoup_job_clashed` (migration 0020): the one error `create_job_keyed`
# raises on purpose, to undo its key's claim when the job clashes. Told by its code alone, so
# that any other failure of the statement, whatever its message, is raised as a failure.
CLASH_SQLSTATE = "P0C01"


def create_job(dialect: PostgresDialect, creation: JobCreation) -> Created | Declined:
    """The job created (and its key claimed and completed), or declined with nothing written."""
    values = encoded_row(creation.job, creation.now, _utc)
    claim = creation.claim
    if claim is None:
        with dialect.statement_write() as conn:
            row = conn.execute(QUERIES["create_job"], (*values, creation.epoch)).fetchone()
        assert row is not None  # the statement's one row, inserted or not
        if row[0] != creation.epoch:
            return Declined(stale=True)
        if row[1] is None:
            return Declined(stale=False)
        job = row_decoding.job_from_row(inserted_row(values, row[2:]), aware_utc)
        return Created(job, creation.answer(job))
    job = stored_job(values, aware_utc)
    body = creation.answer(job)
    key_row = (
        job.tenant,
        claim.key,
        claim.fingerprint,
        claim.method,
        claim.path,
        creation.now,
        CREATED,
        JSON,
        body,
    )
    params = (*key_row, creation.epoch, *values)
    with dialect.statement_write() as conn:
        try:
            row = conn.execute(QUERIES["create_job_keyed"], params).fetchone()
        except psycopg.Error as exc:
            if exc.sqlstate != CLASH_SQLSTATE:
                raise
            return Declined(stale=False)  # the statement, the key's claim with it, undone
    assert row is not None
    if row[0] != creation.epoch:
        return Declined(stale=True)
    if not row[1]:
        return Declined(stale=False)  # the key is another request's (or this one's before)
    return Created(job, body)


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)


__all__ = ["CLASH_SQLSTATE", "create_job"]
