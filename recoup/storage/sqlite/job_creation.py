"""Creating the API's job on SQLite (see `recoup.storage.job_creations`): the epoch read, the
key's claim, the insert, the stored answer and the workers' wake-up as plain statements of one
group-commit unit, without a savepoint of their own (the unit's undoes them all when it fails)."""

from __future__ import annotations

from recoup.errors import RecoupError
from recoup.storage import row_decoding
from recoup.storage.job_creations import (
    CREATED,
    JSON,
    Created,
    Declined,
    JobCreation,
    encoded_row,
)
from recoup.storage.job_rows import from_micros, micros
from recoup.storage.sqlite.dialect import QUERIES, SqliteDialect

Q = QUERIES


class _Clashed(RecoupError):
    """The job clashed after its key was claimed: undo the unit, the claim with it."""


def create_job(dialect: SqliteDialect, creation: JobCreation) -> Created | Declined:
    """The job created (and its key claimed and completed), or declined with nothing written."""
    values = encoded_row(creation.job, creation.now, micros)
    claim = creation.claim
    now = micros(creation.now)

    def unit() -> Created | Declined:
        with dialect.connection() as conn:  # inside the unit: its transaction
            row = conn.execute(Q["token_epoch"]).fetchone()
            if (0 if row is None else int(row[0])) != creation.epoch:
                return Declined(stale=True)
            ids = None if claim is None else {"tenant": creation.job.tenant, "key": claim.key}
            if claim is not None:
                taken = {
                    **(ids or {}),
                    "fingerprint": claim.fingerprint,
                    "method": claim.method,
                    "path": claim.path,
                    "now": now,
                }
                if not conn.execute(Q["claim_key"], taken).rowcount:
                    return Declined(stale=False)
            found = conn.execute(Q["insert_job"], values).fetchone()
            if found is None:
                if claim is not None:
                    raise _Clashed("the job clashed with another")
                return Declined(stale=False)
            job = row_decoding.job_from_row(found, from_micros)
            body = creation.answer(job)
            if ids is not None:
                answer = {"locked_at": now, "status": CREATED, "content_type": JSON, "body": body}
                conn.execute(Q["complete_key"], {**ids, **answer})
            conn.execute(Q["bump_wakeups"])
            return Created(job, body)

    try:
        result = dialect.atomically(unit)
    except _Clashed:
        return Declined(stale=False)
    if isinstance(result, Created):
        dialect.jobs_inserted()
    return result


__all__ = ["create_job"]
