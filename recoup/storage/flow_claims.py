"""Claiming the jobs of flow keys (ARCHITECTURE.md, 'Flow control'), written once for both
backends over a connection that can `execute(query, params)` and their named queries
(`flow_*` in each backend's queries.sql), inside the claim's own transaction.

A claim serves the keys that have jobs due within its horizon, one key at a time: it takes
the key's row in `flow_keys` (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so a key another claim is
serving is skipped, never waited for; SQLite's claims are serialised by its write lock
anyway), counts the key's running jobs against its parallelism, and reserves a start slot for
each job it takes, in due order, from the key's next free start (`recoup.jobs.flow.reserve`);
the slot is the job's attempt start, and the worker fires it then. Nothing else is locked: the
claims of other keys, and of jobs without a key, go on beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from recoup.jobs.flow import DEFAULT_FLOW_PERIOD, most_starts, reserve
from recoup.jobs.model import Job, trusted
from recoup.jobs.store import ClaimParams
from recoup.storage import row_decoding

# The most keys one claim serves (the earliest due first); the others wait for the next claim.
KEYS_PER_CLAIM = 64


def claim_flow_jobs(
    conn: Any,
    queries: Mapping[str, str],
    params: ClaimParams,
    *,
    encode: Callable[[datetime], Any],
    decode: Callable[[Any], datetime],
) -> list[Job]:
    """The flow keys' jobs this claim takes (at most `params.limit`), each with `run_at` set
    to its reserved start."""
    if params.limit <= 0:
        return []
    now, until = params.now, params.now + params.horizon
    keys = conn.execute(
        queries["flow_keys_due"], {"until": encode(until), "keys": KEYS_PER_CLAIM}
    ).fetchall()
    if not keys:
        return []
    missing = sorted((tenant, key) for tenant, key, known, *_ in keys if not known)
    if missing:
        # In (tenant, key) order, so that two claims making keys at once cannot deadlock.
        for tenant, key in missing:
            conn.execute(queries["flow_key_made"], {"tenant": tenant, "key": key})
    room = params.limit
    claimed: list[Job] = []
    for tenant, key, _, found_rate, found_period_s, found_parallelism in keys:
        if room <= 0:
            break
        at_key = {"tenant": tenant, "key": key}
        locked = conn.execute(queries["flow_key_locked"], at_key).fetchone()
        if locked is None:
            continue  # another claim is serving this key
        next_start_at = None if locked[0] is None else decode(locked[0])
        # Read no more of the key's line than it can start within the horizon (by the limits
        # its next job carried when the key was found): a throttled key's backlog then costs
        # each claim a few rows, not a batch of rows it would leave where they are.
        fetch = room
        bound = most_starts(
            now=now,
            until=until,
            next_start_at=next_start_at,
            rate=found_rate,
            period=_period(found_period_s),
        )
        if bound is not None:
            fetch = min(fetch, bound)
        running: int | None = None
        if found_parallelism is not None:
            running = int(conn.execute(queries["flow_running"], at_key).fetchone()[0])
            fetch = min(fetch, found_parallelism - running)
        if fetch <= 0:
            continue
        heads = conn.execute(
            queries["flow_due_jobs"], {**at_key, "until": encode(until), "limit": fetch}
        ).fetchall()
        if not heads:
            continue
        # The key's limits are those its next job carries.
        _, _, rate, period_s, parallelism = heads[0]
        take = room
        if parallelism is not None:
            if running is None:
                running = int(conn.execute(queries["flow_running"], at_key).fetchone()[0])
            take = min(take, parallelism - running)
        period = _period(period_s)
        slots = reserve(
            [decode(row[1]) for row in heads],
            now=now,
            until=until,
            next_start_at=next_start_at,
            rate=rate,
            period=period,
            room=take,
        )
        for row, start in zip(heads, slots.starts, strict=False):
            started = conn.execute(
                queries["flow_start"],
                {
                    "id": row[0],
                    "worker_id": params.worker_id,
                    "start": encode(start),
                    "lease_until": encode(start + params.lease),
                    "now": encode(now),
                },
            ).fetchone()
            if started is not None:
                job = row_decoding.job_from_row(started, decode)
                claimed.append(trusted(Job, {**job.__dict__, "run_at": start}))
        if slots.starts and slots.next_start_at != next_start_at:
            assert slots.next_start_at is not None
            conn.execute(queries["flow_key_moved"], {**at_key, "next": encode(slots.next_start_at)})
        room -= len(slots.starts)
    return claimed


def _period(seconds: float | None) -> timedelta:
    return DEFAULT_FLOW_PERIOD if seconds is None else timedelta(seconds=seconds)


def firing_order(plain: list[Job], flowing: list[Job]) -> list[Job]:
    """One claim's jobs in the order they fire (run_at, then id), as `claimed_jobs` gives."""
    if not flowing:
        return plain
    jobs = plain + flowing
    jobs.sort(key=lambda job: (job.run_at, job.id))
    return jobs


__all__ = ["KEYS_PER_CLAIM", "claim_flow_jobs", "firing_order"]
