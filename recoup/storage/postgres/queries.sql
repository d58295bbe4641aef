-- Named queries of the PostgreSQL backend (loaded by recoup.storage.sql_files.load_queries).
-- Every connection runs with search_path = the store's schema and TimeZone = UTC.

-- create_schema_version --
CREATE TABLE IF NOT EXISTS schema_version (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- schema_version --
SELECT coalesce(max(version), 0) FROM schema_version

-- applied_migrations --
SELECT version FROM schema_version

-- has_migration --
-- Whether one migration was applied: each is applied unless recorded, so a migration numbered
-- below the version in force (branches merged in another order) is still applied.
SELECT count(*) FROM schema_version WHERE version = %(version)s

-- has_schema_version --
SELECT count(*) FROM pg_tables WHERE schemaname = %(schema)s AND tablename = 'schema_version'

-- record_migration --
INSERT INTO schema_version (version, name) VALUES (%(version)s, %(name)s)

-- ensure_tenant --
-- Followed by get_tenant in its own statement: a statement that waited here for a concurrent
-- insert of the same id could not see that row in its own snapshot.
INSERT INTO tenants (id, name, signing_secret, created_at)
VALUES (%(id)s, %(name)s, %(signing_secret)s, %(created_at)s)
ON CONFLICT (id) DO NOTHING

-- get_tenant --
SELECT id, name, signing_secret, created_at, disabled_at, previous_signing_secret,
       previous_secret_until
FROM tenants WHERE id = %(id)s

-- list_tenants --
-- Of the signing secret, only what tells two apart (`recoup.tenancy.secret_display`).
SELECT id, name, created_at, disabled_at, previous_secret_until, substr(signing_secret, 1, 10)
FROM tenants ORDER BY created_at, id

-- _enabled_tenant --
-- A condition on a job's or schedule's `tenant`: not a disabled one. The subquery runs once per
-- statement (it does not depend on the row), over the partial index of disabled tenants.
tenant NOT IN (SELECT id FROM tenants WHERE disabled_at IS NOT NULL)

-- insert_job --
-- One placeholder per column of {insert_columns} (`job_rows.JobEncoder.row`). Only the JSON
-- columns come back, as jsonb reads them (its numbers and keys its own way): the rest of the new
-- row is the values sent (`job_rows.inserted_row`). Sending all 31 columns back cost the round
-- trip about a fifth of its time.
INSERT INTO jobs ({insert_columns})
VALUES (%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
        %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT DO NOTHING
RETURNING target, payload, metadata  -- job_rows.JSON_COLUMNS

-- insert_jobs_unnest --
-- One array per column of {insert_columns} bar the two instants of the insert itself.
INSERT INTO jobs ({insert_columns})
SELECT u.*, %(now)s, %(now)s
FROM unnest(%(id)s::text[], %(tenant)s::text[], %(name)s::text[], %(run_at)s::timestamptz[],
            %(target)s::jsonb[], %(payload)s::jsonb[], %(idempotency_key)s::text[],
            %(max_attempts)s::int[], %(min_backoff_s)s::float8[], %(max_backoff_s)s::float8[],
            %(jitter)s::bool[], %(timeout_s)s::float8[], %(keep_for_s)s::float8[],
            %(schedule_id)s::text[], %(job_group)s::text[],
            %(occurrence_at)s::timestamptz[], %(metadata)s::jsonb[], %(flow_key)s::text[],
            %(flow_rate)s::int[], %(flow_period_s)s::float8[],
            %(flow_parallelism)s::int[], %(flow_order)s::text[],
            %(flow_order_at)s::timestamptz[], %(traceparent)s::text[],
            %(tracestate)s::text[]) AS u
ON CONFLICT DO NOTHING

-- copy_jobs --
COPY jobs ({insert_columns}) FROM STDIN (FORMAT BINARY)

-- create_stage --
-- When a batch clashes, it is COPied into this per-session table (the columns of a new job,
-- typed as in jobs) and moved with ON CONFLICT DO NOTHING (COPY itself cannot skip rows).
CREATE TEMP TABLE IF NOT EXISTS recoup_jobs_stage AS
SELECT {insert_columns} FROM jobs WITH NO DATA

-- copy_stage --
COPY recoup_jobs_stage ({insert_columns}) FROM STDIN (FORMAT BINARY)

-- insert_from_stage --
INSERT INTO jobs ({insert_columns})
SELECT {insert_columns} FROM recoup_jobs_stage
ON CONFLICT DO NOTHING

-- empty_stage --
TRUNCATE recoup_jobs_stage

-- get_job_by_idempotency_key --
SELECT {job_columns} FROM jobs WHERE tenant = %(tenant)s AND idempotency_key = %(key)s

-- get_job --
SELECT {job_columns} FROM jobs WHERE tenant = %(tenant)s AND id = %(id)s

-- get_job_any_tenant --
SELECT tenant FROM jobs WHERE id = %(id)s

-- get_live_job_by_name --
SELECT {job_columns} FROM jobs
WHERE tenant = %(tenant)s AND name = %(name)s AND state IN ('scheduled', 'running')

-- get_latest_job_by_name --
SELECT {job_columns} FROM jobs
WHERE tenant = %(tenant)s AND name = %(name)s
ORDER BY created_at DESC, id DESC
LIMIT 1

-- claim_due --
-- The materialized CTE locks a batch of due rows, skipping rows other claimers hold; it walks
-- the partial index jobs_due, so its cost does not grow with far-future or finished jobs.
WITH due AS MATERIALIZED (
    SELECT id FROM jobs
    WHERE state = 'scheduled' AND NOT held AND flow_key IS NULL AND run_at <= %(until)s
      AND {_enabled_tenant}
    ORDER BY run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs j
SET state = 'running',
    attempts = j.attempts + 1,
    leased_by = %(worker_id)s,
    attempt_started_at = greatest(%(now)s, j.run_at),
    lease_expires_at = greatest(%(now)s, j.run_at) + %(lease)s,
    updated_at = %(now)s
-- = ANY(ARRAY(…)) makes the planner look each id up in the primary key; a join with the CTE
-- may hash the whole table instead, a cost that grows with it.
WHERE j.id = ANY(ARRAY(SELECT id FROM due))
RETURNING {j_job_columns}

-- queue_plans --
-- Queue statements touch a batch of rows found through one index (due jobs in run_at order,
-- ids in the primary key). Right after a bulk insert or a drain, before autovacuum has
-- analysed the table, the planner's estimates are far off and it may read every due job into a
-- bitmap and sort it, or hash every running job, per batch: a cost that grows with the table.
-- These settings, local to the transaction, leave it the plans whose cost follows the batch.
SELECT set_config('enable_bitmapscan', 'off', true),
       set_config('enable_sort', 'off', true),
       set_config('enable_hashjoin', 'off', true),
       set_config('enable_mergejoin', 'off', true)

-- _flow_heads --
-- Each flow key's next job in line (ARCHITECTURE.md, 'Flow control'), with the limits it
-- carries (a key's limits are its next job's): a recursive CTE `heads` that walks the index of
-- keys' lines (jobs_flow_due) from one key's first job to the next key's (a loose index scan),
-- so it reads one row per key, however long the keys' backlogs. `WITH RECURSIVE` goes before.
heads (tenant, flow_key, run_at, flow_order_at, flow_rate, flow_period_s, flow_parallelism) AS (
    SELECT * FROM (
        SELECT tenant, flow_key, run_at, flow_order_at, flow_rate, flow_period_s,
               flow_parallelism
        FROM jobs
        WHERE state = 'scheduled' AND NOT held AND flow_key IS NOT NULL
        ORDER BY tenant, flow_key, coalesce(flow_order_at, run_at), created_at, id
        LIMIT 1
    ) AS first
    UNION ALL
    SELECT n.*
    FROM heads AS h
    -- The next key of the same tenant, else the first of the next tenant: each one seek of
    -- the index (a row-value comparison would scan the rest of the tenant's entries), and
    -- LIMIT 1 stops the Append at the first that finds a row. The row comes with the seek,
    -- so the walk reads no job twice.
    CROSS JOIN LATERAL (
        (SELECT tenant, flow_key, run_at, flow_order_at, flow_rate, flow_period_s,
                flow_parallelism
         FROM jobs
         WHERE state = 'scheduled' AND NOT held AND flow_key IS NOT NULL
           AND tenant = h.tenant AND flow_key > h.flow_key
         ORDER BY tenant, flow_key, coalesce(flow_order_at, run_at), created_at, id
         LIMIT 1)
        UNION ALL
        (SELECT tenant, flow_key, run_at, flow_order_at, flow_rate, flow_period_s,
                flow_parallelism
         FROM jobs
         WHERE state = 'scheduled' AND NOT held AND flow_key IS NOT NULL AND tenant > h.tenant
         ORDER BY tenant, flow_key, coalesce(flow_order_at, run_at), created_at, id
         LIMIT 1)
        LIMIT 1
    ) AS n
)

-- flow_keys_due --
-- The flow keys whose next job in line is due by %(until)s (ARCHITECTURE.md, 'Flow control'), the
-- earliest first, each with whether its row in flow_keys exists yet: one row read per key
-- (`_flow_heads`). A key that cannot start its next job within the horizon is left out, so
-- that it never takes the place of one that can: its next slot is later (a rate), or its
-- running jobs fill the parallelism its next job carries (the claim would take nothing of it
-- either way). The next job's limits come with the key: the claim then reads no more of its
-- line than the slots that fit the horizon.
WITH RECURSIVE {_flow_heads}
SELECT h.tenant, h.flow_key, f.flow_key IS NOT NULL, h.flow_rate, h.flow_period_s,
       h.flow_parallelism
FROM heads AS h
LEFT JOIN flow_keys AS f ON f.tenant = h.tenant AND f.flow_key = h.flow_key
WHERE h.run_at <= %(until)s
  AND (f.next_start_at IS NULL OR f.next_start_at <= %(until)s)
  AND (h.flow_parallelism IS NULL OR h.flow_parallelism > (
      SELECT count(*) FROM jobs AS r
      WHERE r.tenant = h.tenant AND r.flow_key = h.flow_key AND r.state = 'running'))
  AND h.tenant NOT IN (SELECT id FROM tenants WHERE disabled_at IS NOT NULL)
ORDER BY coalesce(h.flow_order_at, h.run_at), h.tenant, h.flow_key
LIMIT %(keys)s

-- flow_key_made --
INSERT INTO flow_keys (tenant, flow_key) VALUES (%(tenant)s, %(key)s) ON CONFLICT DO NOTHING

-- flow_key_locked --
SELECT next_start_at FROM flow_keys WHERE tenant = %(tenant)s AND flow_key = %(key)s
FOR UPDATE SKIP LOCKED

-- flow_due_jobs --
-- A key's scheduled jobs in line: their place (an ordering key's first run_at, else the due
-- time), then creation. The claim takes those due by :until from the front.
SELECT id, run_at, flow_rate, flow_period_s, flow_parallelism FROM jobs
WHERE tenant = %(tenant)s AND flow_key = %(key)s AND state = 'scheduled' AND NOT held
ORDER BY coalesce(flow_order_at, run_at), created_at, id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- flow_running --
-- Claimed ahead or started: both hold a place of the key's parallelism.
SELECT count(*) FROM jobs WHERE tenant = %(tenant)s AND flow_key = %(key)s AND state = 'running'

-- flow_start --
-- A flow job claimed for its reserved start slot (:start, the attempt's start).
UPDATE jobs
SET state = 'running',
    attempts = attempts + 1,
    leased_by = %(worker_id)s,
    attempt_started_at = %(start)s,
    lease_expires_at = %(lease_until)s,
    updated_at = %(now)s
WHERE id = %(id)s AND state = 'scheduled'
RETURNING {job_columns}

-- flow_key_moved --
UPDATE flow_keys SET next_start_at = %(next)s WHERE tenant = %(tenant)s AND flow_key = %(key)s

-- complete_many --
-- One statement for a whole batch: each row applies by compare-and-set (still running, same
-- worker, same attempt); the run log gets the applied ones, plus attempts whose job was
-- cancelled while they ran (logged as cancelled, the job left alone). Returns each applied
-- job's id and its run's outcome ('succeeded' or 'failed': the job ended).
-- %(rows)s is one jsonb object, job id → [0 tenant, 1 attempt, 2 worker, 3 outcome, 4 retry,
-- 5 final_state, 6 retry_at, 7 error, 8 started_at, 9 finished_at, 10 status_code,
-- 11 duration_ms, 12 excerpt, 13 run_worker]: one text parameter from the C JSON encoder,
-- where fifteen arrays cost the client ~10 µs a row to dump. Jobs are found by primary key
-- (= ANY(ARRAY(…)), as claim_due does) and each one's values by key in the object, so there
-- is no join for the planner to make quadratic when it underestimates the running jobs. (`p`
-- is a plain subquery, pulled up into a constant: a CTE would copy the object once a row.)
WITH applied AS (
    UPDATE jobs j
    SET (state, run_at, lease_expires_at, leased_by, attempt_started_at, last_error,
         updated_at, finished_at, expires_at) = (
            SELECT CASE WHEN x.again THEN 'scheduled' ELSE x.v->>5 END,
                   CASE WHEN x.again THEN coalesce((x.v->>6)::timestamptz, %(now)s)
                        ELSE j.run_at END,
                   NULL::timestamptz,
                   CASE WHEN x.v->>5 = 'cancelled' THEN j.leased_by END,
                   NULL::timestamptz,
                   coalesce(x.v->>7, j.last_error),
                   %(now)s::timestamptz,
                   CASE WHEN x.again THEN NULL ELSE %(now)s::timestamptz END,
                   CASE WHEN x.again THEN NULL
                        ELSE %(now)s + j.keep_for_s * interval '1 second' END
            FROM (SELECT v, (v->>4)::bool AND j.attempts < j.max_attempts AS again
                  FROM (SELECT p.d -> j.id AS v) AS v0) AS x
        )
    FROM (SELECT %(rows)s::jsonb AS d) AS p
    -- COLLATE "C" (the same test on this ASCII value) keeps the planner off the partial
    -- index of running jobs: on statistics taken while none ran it looks free, but its id
    -- filter cannot be hashed (the array is not a constant) and turns quadratic.
    WHERE j.id = ANY(ARRAY(SELECT jsonb_object_keys(%(rows)s::jsonb)))
      AND j.state = 'running' COLLATE "C"
      AND j.leased_by = p.d -> j.id ->> 2
      AND j.attempts = (p.d -> j.id ->> 1)::int
    RETURNING j.id, p.d -> j.id AS v,
              CASE WHEN (p.d -> j.id ->> 4)::bool AND j.state = 'failed' THEN 'failed'
                   ELSE p.d -> j.id ->> 3 END AS outcome
),
-- The snapshot of this statement predates the UPDATE above, so a job it applied to still
-- reads as running here; only the refused ones are looked up (usually none).
cancelled_meanwhile AS (
    SELECT j.id, p.d -> j.id AS v, 'cancelled' AS outcome
    FROM jobs j, (SELECT %(rows)s::jsonb AS d) AS p
    WHERE j.id = ANY(ARRAY(SELECT k FROM jsonb_object_keys(%(rows)s::jsonb) AS k
                           WHERE k NOT IN (SELECT id FROM applied)))
      AND j.state = 'cancelled'
      AND j.leased_by = p.d -> j.id ->> 2
      AND j.attempts = (p.d -> j.id ->> 1)::int
),
logged AS (
    INSERT INTO runs (job_id, tenant, attempt, started_at, finished_at, outcome, status_code,
                      duration_ms, response_excerpt, error, worker_id)
    SELECT r.id, r.v->>0, (r.v->>1)::int, (r.v->>8)::timestamptz, (r.v->>9)::timestamptz,
           r.outcome, (r.v->>10)::int, (r.v->>11)::float8, r.v->>12, r.v->>7, r.v->>13
    FROM (SELECT id, v, outcome FROM applied
          UNION ALL
          SELECT id, v, outcome FROM cancelled_meanwhile) AS r
    ON CONFLICT DO NOTHING
)
SELECT id, outcome FROM applied

-- store_clock --
-- The server's clock, which every worker on the wall clock shares: what decides claims, leases
-- and rescues for them (ARCHITECTURE.md, 'Clock skew'). Read first in the transaction that acts
-- on it, so that one instant serves all its statements, the flow keys' included.
SELECT clock_timestamp()

-- heartbeat --
-- %(keys)s: 'id:attempt' per held attempt (NULL: any attempt); a lapsed attempt whose job was
-- claimed again, even under the same worker id, is not extended.
UPDATE jobs
SET lease_expires_at = %(lease_until)s
WHERE id = ANY(%(ids)s::text[]) AND state = 'running' AND leased_by = %(worker_id)s
  AND (%(keys)s::text[] IS NULL OR id || ':' || attempts IN (SELECT unnest(%(keys)s::text[])))
RETURNING id

-- release --
UPDATE jobs
SET state = 'scheduled',
    attempts = attempts - 1,
    lease_expires_at = NULL,
    leased_by = NULL,
    attempt_started_at = NULL,
    updated_at = %(now)s
WHERE id = ANY(%(ids)s::text[]) AND state = 'running' AND leased_by = %(worker_id)s

-- _rescue_lost --
-- The rescue rule of lost attempts (recoup.storage.rules) over a CTE `lost` (id, tenant,
-- attempts, started_at, leased_by, error) of running jobs the statement has locked: log a
-- `lost` run for each and schedule it again now. A lost attempt never consumes the last one
-- (the worker may have died before starting it): a job whose lost attempt was its last gets
-- one more, up to the ceiling of attempts (CHECK on max_attempts), which bounds a job that
-- kills every worker that runs it.
rescued AS (
    UPDATE jobs j
    SET state = CASE WHEN j.attempts < {attempts_ceiling} THEN 'scheduled' ELSE 'failed' END,
        max_attempts = greatest(j.max_attempts, least(j.attempts + 1, {attempts_ceiling})),
        run_at = CASE WHEN j.attempts < {attempts_ceiling} THEN %(now)s ELSE j.run_at END,
        lease_expires_at = NULL,
        leased_by = NULL,
        attempt_started_at = NULL,
        last_error = l.error,
        updated_at = %(now)s,
        finished_at = CASE WHEN j.attempts < {attempts_ceiling} THEN NULL ELSE %(now)s END,
        expires_at = CASE WHEN j.attempts < {attempts_ceiling} THEN NULL
                          ELSE %(now)s + j.keep_for_s * interval '1 second' END
    FROM lost l
    WHERE j.id = l.id
    RETURNING j.id, l.leased_by
),
logged AS (
    INSERT INTO runs (job_id, tenant, attempt, started_at, finished_at, outcome, status_code,
                      duration_ms, response_excerpt, error, worker_id)
    SELECT id, tenant, attempts, least(started_at, %(now)s), %(now)s, 'lost', NULL,
           greatest(0, extract(epoch FROM %(now)s - started_at) * 1000), NULL, error, leased_by
    FROM lost
    ON CONFLICT DO NOTHING
)

-- rescue_expired --
-- The rescue of lost leases (see recoup.storage.rules; SQLite runs the same rule as
-- `expired_leases`, `log_lost_attempts` and `rescue_jobs`) in one statement.
WITH lost AS MATERIALIZED (
    SELECT id, tenant, attempts, coalesce(attempt_started_at, updated_at) AS started_at,
           leased_by, {lost_error} AS error
    FROM jobs
    WHERE state = 'running' AND lease_expires_at < %(now)s
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
{_rescue_lost}
SELECT id FROM rescued

-- hand_back_jobs --
-- The running jobs of dead workers (or of a worker id's previous session), by the rescue
-- rule; it waits for rows another transaction holds (a completion, a lease rescue), then
-- leaves out those no longer running. Running jobs are few (a partial index holds them).
WITH lost AS MATERIALIZED (
    SELECT id, tenant, attempts, coalesce(attempt_started_at, updated_at) AS started_at,
           leased_by, {lost_session_error} AS error
    FROM jobs
    WHERE state = 'running' AND leased_by = ANY(%(workers)s::text[])
    FOR UPDATE
),
{_rescue_lost}
SELECT id, leased_by FROM rescued

-- _worker_lock --
('x' || left(md5(current_schema() || '/' || id), 16))::bit(64)::bigint

-- lock_worker --
-- On the session's own connection: held until it ends (or the connection is lost). The key
-- (`_worker_lock`) is 64 bits of md5(schema/id), so that the workers of two schemas in one
-- database never share one (advisory locks belong to the database).
SELECT pg_try_advisory_lock({_worker_lock}) FROM (SELECT %(id)s::text AS id) AS w

-- register_worker --
INSERT INTO workers (id, host, pid, process_key, started_at, heartbeat_at)
VALUES (%(id)s, %(host)s, %(pid)s, %(process_key)s, clock_timestamp(), clock_timestamp())
ON CONFLICT (id) DO UPDATE
SET host = excluded.host, pid = excluded.pid, process_key = excluded.process_key,
    started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at

-- beat_worker --
UPDATE workers SET heartbeat_at = clock_timestamp() WHERE id = %(id)s RETURNING 1

-- dead_workers --
-- Workers whose heartbeat is older than the grace and whose session lock is free. The lock
-- is taken for this transaction (released at its end), so the worker cannot come back while
-- its jobs are handed back; CASE tries it for stale rows only. A live worker's lock is held,
-- so the attempt fails and takes nothing.
SELECT id FROM workers
WHERE CASE WHEN heartbeat_at < clock_timestamp() - %(grace)s
           THEN pg_try_advisory_xact_lock({_worker_lock}) ELSE false END
ORDER BY heartbeat_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- delete_workers --
DELETE FROM workers WHERE id = ANY(%(ids)s::text[])

-- list_workers --
SELECT id, host, pid, process_key, started_at, heartbeat_at FROM workers
ORDER BY started_at, id

-- notify --
SELECT pg_notify(%(channel)s, '')

-- next_due_at --
-- The jobs of a disabled tenant are never due: held ones are outside jobs_due, and the
-- others (few: retries of attempts running when it was disabled) are stepped over. A flow
-- key's jobs are due at the later of its next job's instant and the key's next free start;
-- a key at the parallelism its next job carries is not due (a completion, or the idle poll,
-- wakes the worker), as the claim (`flow_keys_due`) finds it. The keys come from the same
-- walk, one row read per key (`_flow_heads`), not a GROUP BY of every scheduled flow job.
WITH RECURSIVE {_flow_heads}
SELECT min(run_at) FROM (
    SELECT * FROM (
        SELECT run_at FROM jobs
        WHERE state = 'scheduled' AND NOT held AND flow_key IS NULL AND {_enabled_tenant}
        ORDER BY run_at
        LIMIT 1
    ) AS plain
    UNION ALL
    SELECT greatest(h.run_at, f.next_start_at)
    FROM heads AS h
    LEFT JOIN flow_keys AS f ON f.tenant = h.tenant AND f.flow_key = h.flow_key
    WHERE (h.flow_parallelism IS NULL OR h.flow_parallelism > (
        SELECT count(*) FROM jobs AS r
        WHERE r.tenant = h.tenant AND r.flow_key = h.flow_key AND r.state = 'running'))
      AND h.tenant NOT IN (SELECT id FROM tenants WHERE disabled_at IS NOT NULL)
) AS due

-- _cancel_set --
-- The SET clause of every cancelling statement. leased_by and attempt_started_at stay, so the
-- completion of an attempt cancelled while it ran is logged as cancelled.
SET state = 'cancelled',
    lease_expires_at = NULL,
    updated_at = %(now)s,
    finished_at = %(now)s,
    expires_at = %(now)s + keep_for_s * interval '1 second'

-- cancel_job --
WITH cancelled AS (
    UPDATE jobs
    {_cancel_set}
    WHERE tenant = %(tenant)s AND id = %(id)s AND state IN ('scheduled', 'running')
    RETURNING {job_columns}
)
SELECT * FROM cancelled
UNION ALL
SELECT {job_columns} FROM jobs
WHERE tenant = %(tenant)s AND id = %(id)s AND NOT EXISTS (SELECT 1 FROM cancelled)

-- cancel_unbegun_job --
-- As cancel_job, for a job never claimed: one running, or back to scheduled after an attempt
-- (a retry, a rescue), is left to finish and returned as it is.
WITH cancelled AS (
    UPDATE jobs
    {_cancel_set}
    WHERE tenant = %(tenant)s AND id = %(id)s AND state = 'scheduled' AND attempts = 0
    RETURNING {job_columns}
)
SELECT * FROM cancelled
UNION ALL
SELECT {job_columns} FROM jobs
WHERE tenant = %(tenant)s AND id = %(id)s AND NOT EXISTS (SELECT 1 FROM cancelled)

-- cancel_by_name --
UPDATE jobs
{_cancel_set}
WHERE tenant = %(tenant)s AND name = %(name)s AND state IN ('scheduled', 'running')

-- cancel_by_prefix --
-- A byte-wise range (the column's "C" collation) walks the live-name index; U+10FFFF is the
-- greatest code point, so every name that starts with the prefix sorts before prefix || it.
UPDATE jobs
{_cancel_set}
WHERE tenant = %(tenant)s
  AND name >= %(prefix)s AND name < %(prefix)s || chr(1114111)
  AND state IN ('scheduled', 'running')

-- cancel_group --
-- Exact equality, never a prefix; walks the partial index of live grouped jobs.
UPDATE jobs
{_cancel_set}
WHERE tenant = %(tenant)s AND job_group = %(group)s AND state IN ('scheduled', 'running')

-- cancel_schedule_jobs --
UPDATE jobs
{_cancel_set}
WHERE schedule_id = %(schedule_id)s AND state IN ('scheduled', 'running')

-- _list_filters --
-- The optional filters of a listing, newest first; the cursor is the (created_at, id) of the
-- last row of the previous page.
  AND (%(state)s::text IS NULL OR state = %(state)s::text)
  AND (%(prefix)s::text IS NULL
       OR (name >= %(prefix)s::text AND name < %(prefix)s::text || chr(1114111)))
  AND (%(schedule_id)s::text IS NULL OR schedule_id = %(schedule_id)s::text)
  AND (%(name)s::text IS NULL OR name = %(name)s::text)
  AND (%(metadata)s::jsonb IS NULL OR metadata @> %(metadata)s::jsonb)
  AND (%(cursor_created)s::timestamptz IS NULL
       OR (created_at, id) < (%(cursor_created)s::timestamptz, %(cursor_id)s::text))
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s

-- list_jobs --
SELECT {job_columns} FROM jobs
WHERE tenant = %(tenant)s
{_list_filters}

-- list_group_jobs --
-- A group's jobs through the index (tenant, job_group, created_at, id), as on SQLite.
SELECT {job_columns} FROM jobs
WHERE tenant = %(tenant)s AND job_group = %(group)s::text
{_list_filters}

-- list_named_jobs --
-- The jobs of exactly one name through the index (tenant, name, created_at), as on SQLite.
SELECT {job_columns} FROM jobs
WHERE tenant = %(tenant)s AND name = %(name)s::text
{_list_filters}

-- list_metadata_jobs --
-- Jobs carrying the pairs of a metadata filter: `@>` through the GIN index of jobs that carry
-- metadata (jobs_metadata; its predicate is repeated so that the planner may use it).
SELECT {job_columns} FROM jobs
WHERE tenant = %(tenant)s AND metadata <> '{}'::jsonb
{_list_filters}

-- update_scheduled_job --
-- A PATCH: only while the job is scheduled and has never started (a claim makes it running
-- first, under the row lock this UPDATE waits for), in one statement.
UPDATE jobs
SET run_at = %(run_at)s, target = %(target)s::jsonb, name = %(name)s,
    max_attempts = %(max_attempts)s, min_backoff_s = %(min_backoff_s)s,
    max_backoff_s = %(max_backoff_s)s, jitter = %(jitter)s, timeout_s = %(timeout_s)s,
    metadata = %(metadata)s::jsonb, updated_at = %(now)s
WHERE tenant = %(tenant)s AND id = %(id)s AND state = 'scheduled' AND attempts = 0
RETURNING {job_columns}

-- runs --
SELECT job_id, tenant, attempt, started_at, finished_at, outcome, status_code, duration_ms,
       response_excerpt, error, worker_id
FROM runs
WHERE tenant = %(tenant)s AND job_id = %(job_id)s
ORDER BY attempt

-- list_runs --
-- A page of the run log, first attempt first; the cursor is the last attempt of the previous
-- page.
SELECT job_id, tenant, attempt, started_at, finished_at, outcome, status_code, duration_ms,
       response_excerpt, error, worker_id
FROM runs
WHERE tenant = %(tenant)s AND job_id = %(job_id)s AND attempt > %(after_attempt)s
ORDER BY attempt
LIMIT %(limit)s

-- count_by_state --
SELECT state, count(*) FROM jobs GROUP BY state

-- count_live --
-- Each count walks its state's partial indexes (jobs_due and jobs_held, jobs_leases), never
-- finished rows; held jobs (of disabled tenants) are scheduled too.
SELECT 'scheduled',
       (SELECT count(*) FROM jobs WHERE state = 'scheduled' AND NOT held AND flow_key IS NULL)
       + (SELECT count(*) FROM jobs
          WHERE state = 'scheduled' AND NOT held AND flow_key IS NOT NULL)
       + (SELECT count(*) FROM jobs WHERE state = 'scheduled' AND held)
UNION ALL
SELECT 'running', count(*) FROM jobs WHERE state = 'running'

-- count_by_state_of_tenant --
SELECT state, count(*) FROM jobs WHERE tenant = %(tenant)s GROUP BY state

-- count_by_tenant --
SELECT tenant, state, count(*) FROM jobs GROUP BY tenant, state

-- due_backlog --
-- Served by the partial index of scheduled jobs on run_at.
-- Held jobs (of disabled tenants) are not: nothing fires them.
SELECT (SELECT count(*) FROM jobs
        WHERE state = 'scheduled' AND NOT held AND flow_key IS NULL AND run_at <= %(now)s)
       + (SELECT count(*) FROM jobs
          WHERE state = 'scheduled' AND NOT held AND flow_key IS NOT NULL AND run_at <= %(now)s)

-- prune_jobs --
DELETE FROM jobs
WHERE id = ANY(ARRAY(SELECT id FROM jobs WHERE expires_at <= %(now)s
                     ORDER BY expires_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED))

-- prune_runs --
-- By physical row id (a TID scan): no join with the whole log.
DELETE FROM runs
WHERE ctid = ANY(ARRAY(SELECT ctid FROM runs WHERE finished_at < %(before)s
                       ORDER BY finished_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED))

-- insert_schedule --
INSERT INTO schedules (id, tenant, name, rule, target, payload, max_attempts, min_backoff_s,
                       max_backoff_s, jitter, timeout_s, missed, paused, next_fire_at,
                       created_at, updated_at, metadata, start_at, end_at, flow,
                       traceparent, tracestate)
VALUES (%(id)s, %(tenant)s, %(name)s, %(rule)s::jsonb, %(target)s::jsonb, %(payload)s::jsonb,
        %(max_attempts)s, %(min_backoff_s)s, %(max_backoff_s)s, %(jitter)s, %(timeout_s)s,
        %(missed)s, false, %(next_fire_at)s, %(now)s, %(now)s, %(metadata)s::jsonb,
        %(start_at)s, %(end_at)s, %(flow)s::jsonb, %(traceparent)s, %(tracestate)s)
ON CONFLICT DO NOTHING
RETURNING {schedule_columns}

-- get_schedule --
SELECT {schedule_columns} FROM schedules WHERE tenant = %(tenant)s AND id = %(id)s

-- list_schedules --
-- By name through the index of live names (tenant, name); the cursor is the last name of the
-- previous page.
SELECT {schedule_columns} FROM schedules
WHERE tenant = %(tenant)s AND deleted_at IS NULL
  AND (%(paused)s::boolean IS NULL OR paused = %(paused)s::boolean)
  AND (%(ended)s::boolean IS NULL OR (next_fire_at IS NULL) = %(ended)s::boolean)
  AND (%(name)s::text IS NULL OR name = %(name)s::text)
  AND (%(metadata)s::jsonb IS NULL OR metadata @> %(metadata)s::jsonb)
  AND (%(after_name)s::text IS NULL OR name > %(after_name)s::text)
ORDER BY name
LIMIT %(limit)s

-- set_schedule_paused --
UPDATE schedules
SET paused = %(paused)s,
    next_fire_at = CASE WHEN NOT %(paused)s AND %(next_fire_at)s::timestamptz IS NOT NULL
                        THEN %(next_fire_at)s::timestamptz ELSE next_fire_at END,
    updated_at = %(now)s
WHERE tenant = %(tenant)s AND id = %(id)s AND deleted_at IS NULL
RETURNING {schedule_columns}

-- delete_schedule --
UPDATE schedules
SET deleted_at = %(now)s, updated_at = %(now)s
WHERE tenant = %(tenant)s AND id = %(id)s AND deleted_at IS NULL

-- due_schedules --
SELECT {schedule_columns} FROM schedules
WHERE NOT paused AND deleted_at IS NULL AND next_fire_at <= %(until)s
  AND {_enabled_tenant}
ORDER BY next_fire_at
LIMIT %(limit)s

-- advance_schedule --
UPDATE schedules
SET next_fire_at = %(new_next)s, updated_at = %(now)s
WHERE id = %(id)s AND next_fire_at = %(expected_next)s AND NOT paused AND deleted_at IS NULL
  AND (%(revision)s::integer IS NULL OR revision = %(revision)s::integer)

-- redrive_job --
-- A job that failed for good, scheduled again now with a fresh budget of attempts: the budget
-- it was created with (attempt_budget, kept by its first redrive), up to the ceiling (its
-- attempt numbers and run log continue). Nothing (no row) unless it failed, is below the
-- ceiling and its name is free among live jobs.
UPDATE jobs
SET state = 'scheduled',
    max_attempts = least(attempts + coalesce(attempt_budget, max_attempts), {attempts_ceiling}),
    attempt_budget = coalesce(attempt_budget, max_attempts),
    run_at = %(now)s,
    lease_expires_at = NULL,
    leased_by = NULL,
    attempt_started_at = NULL,
    updated_at = %(now)s,
    finished_at = NULL,
    expires_at = NULL
WHERE tenant = %(tenant)s AND id = %(id)s AND state = 'failed'
  AND attempts < {attempts_ceiling}
  AND (name IS NULL OR NOT EXISTS (
      SELECT 1 FROM jobs AS live
      WHERE live.tenant = %(tenant)s AND live.name = jobs.name
        AND live.state IN ('scheduled', 'running')))
RETURNING {job_columns}

-- delete_failed_job --
-- A job that failed for good, removed (QStash's DLQ delete); its run log stays until pruned.
DELETE FROM jobs WHERE tenant = %(tenant)s AND id = %(id)s AND state = 'failed'

-- replace_schedule --
-- A PATCH of a schedule: its whole definition, compare-and-set on the revision read.
UPDATE schedules
SET name = %(name)s, rule = %(rule)s::jsonb, target = %(target)s::jsonb,
    max_attempts = %(max_attempts)s, min_backoff_s = %(min_backoff_s)s,
    max_backoff_s = %(max_backoff_s)s, jitter = %(jitter)s, timeout_s = %(timeout_s)s,
    missed = %(missed)s, paused = %(paused)s, next_fire_at = %(next_fire_at)s,
    metadata = %(metadata)s::jsonb, start_at = %(start_at)s, end_at = %(end_at)s,
    revision = revision + 1, updated_at = %(now)s
WHERE tenant = %(tenant)s AND id = %(id)s AND deleted_at IS NULL
  AND revision = %(expected_revision)s
RETURNING {schedule_columns}

-- delete_pending_occurrences --
-- The jobs a schedule materialised ahead that have not started, for occurrences after now:
-- made from the old definition, they go, and the schedule materialises them again.
DELETE FROM jobs
WHERE schedule_id = %(schedule_id)s AND state = 'scheduled' AND attempts = 0
  AND occurrence_at > %(now)s

-- replace_unstarted_job --
-- on_conflict "replace": every field of a new job but its id, idempotency key and creation,
-- only while the job is scheduled and has never started (as update_scheduled_job).
UPDATE jobs
SET run_at = %(run_at)s, target = %(target)s::jsonb, payload = %(payload)s::jsonb, name = %(name)s,
    max_attempts = %(max_attempts)s, min_backoff_s = %(min_backoff_s)s,
    max_backoff_s = %(max_backoff_s)s, jitter = %(jitter)s, timeout_s = %(timeout_s)s,
    keep_for_s = %(keep_for_s)s, job_group = %(job_group)s, metadata = %(metadata)s::jsonb,
    flow_key = %(flow_key)s, flow_rate = %(flow_rate)s, flow_period_s = %(flow_period_s)s,
    flow_parallelism = %(flow_parallelism)s, flow_order = %(flow_order)s,
    flow_order_at = %(flow_order_at)s, updated_at = %(now)s
WHERE tenant = %(tenant)s AND id = %(id)s AND state = 'scheduled' AND attempts = 0
RETURNING {job_columns}

-- get_job_for_update --
-- The job a PATCH reads, its row locked until the transaction ends (a claim skips it,
-- SKIP LOCKED, and finds it changed after).
SELECT {job_columns} FROM jobs WHERE tenant = %(tenant)s AND id = %(id)s
FOR UPDATE

-- live_schedule_by_name --
SELECT id FROM schedules
WHERE tenant = %(tenant)s AND name = %(name)s AND deleted_at IS NULL

-- create_job --
-- The API's job while the token epoch (migration 0018) is still the caller's, in one statement:
-- the epoch read, and the row or nothing (a clash, a moved epoch), in one round trip
-- (`recoup.storage.job_creations`). One placeholder per column of {insert_columns}, then the
-- epoch. Of the row, only its id and JSON columns come back, as `insert_job`'s do.
WITH epoch AS (SELECT coalesce((SELECT epoch FROM auth_epoch WHERE id = 1), 0) AS epoch),
job AS (
    INSERT INTO jobs ({insert_columns})
    SELECT %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
           %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s
    WHERE (SELECT epoch FROM epoch) = %s
    ON CONFLICT DO NOTHING
    RETURNING id, target, payload, metadata  -- job_rows.JSON_COLUMNS after the id
)
SELECT (SELECT epoch FROM epoch), job.* FROM (VALUES (1)) AS one (x) LEFT JOIN job ON true

-- create_job_keyed --
-- The same under the request's idempotency key, its answer stored with it: the key's row
-- (tenant, key, fingerprint, method, path, created_at, status, content_type, body), inserted
-- completed while the epoch holds (the fifteenth placeholder) and the key is free; the job
-- only then. A job that clashes with another after the key was claimed undoes the statement,
-- and with it the key, by raising `recoup_job_clashed`'s error (migration 0020, SQLSTATE
-- P0C01): the caller tells that code from any other error and answers such a request the
-- general way.
WITH epoch AS (SELECT coalesce((SELECT epoch FROM auth_epoch WHERE id = 1), 0) AS epoch),
claim AS (
    INSERT INTO idempotency_keys
        (tenant, key, fingerprint, method, path, created_at, status, content_type, body)
    SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s
    WHERE (SELECT epoch FROM epoch) = %s
    ON CONFLICT (tenant, key) DO NOTHING
    RETURNING 1
),
job AS (
    INSERT INTO jobs ({insert_columns})
    SELECT %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
           %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s
    WHERE EXISTS (SELECT 1 FROM claim)
    ON CONFLICT DO NOTHING
    RETURNING id
)
SELECT (SELECT epoch FROM epoch), EXISTS (SELECT 1 FROM claim),
       CASE WHEN EXISTS (SELECT 1 FROM claim) AND NOT EXISTS (SELECT 1 FROM job)
            THEN recoup_job_clashed()
       END
