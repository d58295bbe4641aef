"""The API tables (idempotency keys and API tokens, migration 0002; operators' actions, 0017)
on both backends, written once over the dialect: the mapping between token records and rows,
and every operation (`SqlApiTables`, what `Store.api_tables()` returns). Only claiming a key
(`begin`) and creating a job at once (`create_job`) differ by backend in more than their SQL:
each backend's `key_claims.claim_key` and `job_creation.create_job`, which `SqlApiTables` takes
as arguments."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from recoup.idempotency.keys import DEFAULT_LOCK_TIMEOUT, Outcome
from recoup.jobs.model import new_id
from recoup.storage.dialect import Dialect, ping
from recoup.storage.job_creations import Created, CreateJob, Declined, JobCreation
from recoup.storage.job_rows import DecodeInstant
from recoup.tenancy import ActionSubject, OperatorAction, TokenInfo, TokenOwner

T = TypeVar("T")

RETRY_AFTER_SECONDS = 1  # an in-flight request usually ends within milliseconds


@dataclass(frozen=True, slots=True)
class KeyRequest:
    """A request's claim of an idempotency key, as a backend's `claim_key` takes it."""

    ids: Mapping[str, Any]  # tenant, key: the parameters naming the key's row
    claim: Mapping[str, Any]  # ids, fingerprint, method, path and now (encoded): `claim_key`'s
    fingerprint: str
    now: datetime
    lock_timeout: timedelta


ClaimKey = Callable[[Any, KeyRequest], Outcome]  # (the backend's dialect, the request)


def token_from_row(row: Sequence[Any], instant: DecodeInstant) -> TokenInfo:
    """A row of `id, tenant, prefix, label, created_at, revoked_at` (the `*_token` queries)."""
    return TokenInfo(
        id=row[0],
        tenant=row[1],
        prefix=row[2],
        label=row[3],
        created_at=instant(row[4]),
        revoked_at=None if row[5] is None else instant(row[5]),
    )


class SqlApiTables:
    """`IdempotencyStore` and `TokenStore` (`recoup.storage.ApiTables`) over a dialect."""

    def __init__(self, dialect: Dialect, claim_key: ClaimKey, create_job: CreateJob) -> None:
        self._dialect = dialect
        self._claim_key = claim_key
        self._create_job = create_job
        self._sql = dialect.queries

    def ping(self) -> None:
        """Raise `StorageError` unless the database answers."""
        ping(self._dialect)

    # Idempotency keys

    def atomically(self, fn: Callable[[], T]) -> T:
        """`fn` as one transaction of the store (see `SqliteDialect.atomically` and
        `PostgresDialect.atomically`)."""
        return self._dialect.atomically(fn)

    def begin(
        self,
        *,
        tenant: str,
        key: str,
        fingerprint: str,
        method: str,
        path: str,
        now: datetime,
        lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT,
    ) -> Outcome:
        ids = {"tenant": tenant, "key": key}
        claim = {
            **ids,
            "fingerprint": fingerprint,
            "method": method,
            "path": path,
            "now": self._dialect.encode_instant(now),
        }
        request = KeyRequest(ids, claim, fingerprint, now, lock_timeout)
        return self._claim_key(self._dialect, request)

    def create_job(self, creation: JobCreation) -> Created | Declined:
        """The API's usual job creation in one unit (`recoup.storage.job_creations`)."""
        return self._create_job(self._dialect, creation)

    def complete(
        self,
        *,
        tenant: str,
        key: str,
        locked_at: datetime,
        status: int,
        body: bytes,
        content_type: str,
    ) -> None:
        with self._dialect.statement_write() as conn:
            conn.execute(
                self._sql["complete_key"],
                {
                    "tenant": tenant,
                    "key": key,
                    "locked_at": self._dialect.encode_instant(locked_at),
                    "status": status,
                    "content_type": content_type,
                    "body": body,
                },
            )

    def release(self, *, tenant: str, key: str, locked_at: datetime) -> None:
        params = {
            "tenant": tenant,
            "key": key,
            "locked_at": self._dialect.encode_instant(locked_at),
        }
        with self._dialect.statement_write() as conn:
            conn.execute(self._sql["release_key"], params)

    def prune_keys(self, *, older_than: datetime, limit: int = 10_000) -> int:
        params = {"before": self._dialect.encode_instant(older_than), "limit": limit}
        with self._dialect.write() as conn:
            pruned: int = conn.execute(self._sql["prune_keys"], params).rowcount
        return pruned

    # Dashboard sessions ended by a logout

    def end_session(self, nonce: str, *, expires: int) -> None:
        """Record a dashboard session as ended until `expires` (Unix seconds)."""
        with self._dialect.statement_write() as conn:
            conn.execute(self._sql["end_session"], {"nonce": nonce, "expires_at": expires})

    def session_ended(self, nonce: str) -> bool:
        with self._dialect.statement_read() as conn:
            return conn.execute(self._sql["session_ended"], {"nonce": nonce}).fetchone() is not None

    def prune_ended_sessions(self, *, before: int) -> int:
        with self._dialect.write() as conn:
            pruned: int = conn.execute(
                self._sql["prune_ended_sessions"], {"before": before}
            ).rowcount
        return pruned

    # Operators' actions (migration 0017)

    def record_action(self, action: OperatorAction) -> None:
        with self._dialect.statement_write() as conn:
            conn.execute(
                self._sql["record_action"],
                {
                    "id": new_id(),
                    "tenant": action.tenant,
                    "subject": action.subject.value,
                    "subject_id": action.subject_id,
                    "action": action.action,
                    "who": action.who,
                    "at": self._dialect.encode_instant(action.at),
                    "detail": action.detail,
                },
            )

    def actions_on(
        self, tenant: str, subject: ActionSubject, subject_id: str
    ) -> list[OperatorAction]:
        params = {"tenant": tenant, "subject": subject.value, "subject_id": subject_id}
        with self._dialect.statement_read() as conn:
            rows = conn.execute(self._sql["actions_on"], params).fetchall()
        instant = self._dialect.decode_instant
        return [
            OperatorAction(
                tenant=row[0],
                subject=ActionSubject(row[1]),
                subject_id=row[2],
                action=row[3],
                who=row[4],
                at=instant(row[5]),
                detail=row[6],
            )
            for row in rows
        ]

    # API tokens

    def add_token(
        self,
        *,
        token_id: str,
        tenant: str,
        token_hash: str,
        prefix: str,
        label: str | None,
        now: datetime,
    ) -> TokenInfo:
        with self._dialect.write() as conn:
            row = conn.execute(
                self._sql["insert_token"],
                {
                    "id": token_id,
                    "tenant": tenant,
                    "token_hash": token_hash,
                    "prefix": prefix,
                    "label": label,
                    "now": self._dialect.encode_instant(now),
                },
            ).fetchone()
        assert row is not None  # INSERT … RETURNING returns the row or raises
        return token_from_row(row, self._dialect.decode_instant)

    def token_owner(self, token_hash: str) -> TokenOwner | None:
        with self._dialect.statement_read() as conn:
            row = conn.execute(self._sql["token_owner"], {"token_hash": token_hash}).fetchone()
        if row is None:
            return None
        return TokenOwner(tenant=str(row[0]), disabled=bool(row[1]), epoch=int(row[2] or 0))

    def token_epoch(self) -> int:
        # Inside a unit of work (`atomically`), a statement of its transaction.
        with self._dialect.statement_read() as conn:
            row = conn.execute(self._sql["token_epoch"]).fetchone()
        return 0 if row is None else int(row[0])

    def list_tokens(self, tenant: str | None = None) -> list[TokenInfo]:
        with self._dialect.read() as conn:
            rows = conn.execute(self._sql["list_tokens"], {"tenant": tenant}).fetchall()
        instant = self._dialect.decode_instant
        return [token_from_row(row, instant) for row in rows]

    def revoke_token(self, token_id: str, *, now: datetime) -> TokenInfo | None:
        with self._dialect.write() as conn:
            conn.execute(
                self._sql["revoke_token"],
                {"id": token_id, "now": self._dialect.encode_instant(now)},
            )
            row = conn.execute(self._sql["get_token"], {"id": token_id}).fetchone()
        return None if row is None else token_from_row(row, self._dialect.decode_instant)
