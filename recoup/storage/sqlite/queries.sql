-- Named queries of the SQLite backend (loaded by recoup.storage.sql_files.load_queries).
-- Instants are integer microseconds since the epoch (UTC); :now is one too.

-- create_schema_version --
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at INTEGER NOT NULL
) STRICT

-- schema_version --
SELECT coalesce(max(version), 0) FROM schema_version

-- applied_migrations --
SELECT version FROM schema_version

-- has_migration --
-- Whether one migration was applied: each is applied unless recorded, so a migration numbered
-- below the version in force (branches merged in another order) is still applied.
SELECT count(*) FROM schema_version WHERE version = :version

-- has_schema_version --
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'

-- record_migration --
INSERT INTO schema_version (version, name, applied_at) VALUES (:version, :name, :now)

-- ensure_tenant --
INSERT INTO tenants (id, name, signing_secret, created_at)
VALUES (:id, :name, :signing_secret, :created_at)
ON CONFLICT (id) DO NOTHING

-- get_tenant --
SELECT id, name, signing_secret, created_at, disabled_at, previous_signing_secret,
       previous_secret_until
FROM tenants WHERE id = :id

-- list_tenants --
-- Of the signing secret, only what tells two apart (`recoup.tenancy.secret_display`).
SELECT id, name, created_at, disabled_at, previous_secret_until, substr(signing_secret, 1, 10)
FROM tenants ORDER BY created_at, id

-- _enabled_tenant --
-- A condition on a job's or schedule's `tenant`: not a disabled one. The subquery runs once per
-- statement (it does not depend on the row), over the partial index of disabled tenants.
tenant NOT IN (SELECT id FROM tenants WHERE disabled_at IS NOT NULL)

-- _insert_values --
-- A new job's row: one placeholder per column of {insert_columns} (`job_rows.JobEncoder.row`).
INSERT INTO jobs ({insert_columns})
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING

-- insert_job --
{_insert_values}
RETURNING {job_columns}

-- insert_job_quietly --
{_insert_values}

-- get_job_by_idempotency_key --
SELECT {job_columns} FROM jobs WHERE tenant = :tenant AND idempotency_key = :key

-- get_job --
SELECT {job_columns} FROM jobs WHERE tenant = :tenant AND id = :id

-- get_job_any_tenant --
SELECT tenant FROM jobs WHERE id = :id

-- get_live_job_by_name --
SELECT {job_columns} FROM jobs
WHERE tenant = :tenant AND name = :name AND state IN ('scheduled', 'running')

-- get_latest_job_by_name --
SELECT {job_columns} FROM jobs
WHERE tenant = :tenant AND name = :name
ORDER BY created_at DESC, id DESC
LIMIT 1

-- claim_due --
UPDATE jobs
SET state = 'running',
    attempts = attempts + 1,
    leased_by = :worker_id,
    attempt_started_at = max(:now, run_at),
    lease_expires_at = max(:now, run_at) + :lease,
    updated_at = :now
WHERE id IN (
    SELECT id FROM jobs
    WHERE state = 'scheduled' AND held = 0 AND flow_key IS NULL AND run_at <= :until
      AND {_enabled_tenant}
    ORDER BY run_at
    LIMIT :limit
)
RETURNING {job_columns}

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
        WHERE state = 'scheduled' AND held = 0 AND flow_key IS NOT NULL
        ORDER BY tenant, flow_key, coalesce(flow_order_at, run_at), created_at, id
        LIMIT 1
    ) AS first
    UNION ALL
    SELECT n.tenant, n.flow_key, n.run_at, n.flow_order_at, n.flow_rate, n.flow_period_s,
           n.flow_parallelism
    FROM heads AS h
    -- The next key of the same tenant, else the first of the next tenant: each one seek of
    -- the index (a row-value comparison would scan the rest of the tenant's entries). The
    -- row found is carried on, so the walk reads no job twice.
    JOIN jobs AS n ON n.id = coalesce(
        (SELECT id FROM jobs
         WHERE state = 'scheduled' AND held = 0 AND flow_key IS NOT NULL
           AND tenant = h.tenant AND flow_key > h.flow_key
         ORDER BY tenant, flow_key, coalesce(flow_order_at, run_at), created_at, id
         LIMIT 1),
        (SELECT id FROM jobs
         WHERE state = 'scheduled' AND held = 0 AND flow_key IS NOT NULL AND tenant > h.tenant
         ORDER BY tenant, flow_key, coalesce(flow_order_at, run_at), created_at, id
         LIMIT 1)
    )
)

-- flow_keys_due --
-- The flow keys whose next job in line is due by :until (ARCHITECTURE.md, 'Flow control'), the
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
WHERE h.run_at <= :until
  AND (f.next_start_at IS NULL OR f.next_start_at <= :until)
  AND (h.flow_parallelism IS NULL OR h.flow_parallelism > (
      SELECT count(*) FROM jobs AS r
      WHERE r.tenant = h.tenant AND r.flow_key = h.flow_key AND r.state = 'running'))
  AND h.tenant NOT IN (SELECT id FROM tenants WHERE disabled_at IS NOT NULL)
ORDER BY coalesce(h.flow_order_at, h.run_at), h.tenant, h.flow_key
LIMIT :keys

-- flow_key_made --
INSERT INTO flow_keys (tenant, flow_key) VALUES (:tenant, :key) ON CONFLICT DO NOTHING

-- flow_key_locked --
SELECT next_start_at FROM flow_keys WHERE tenant = :tenant AND flow_key = :key

-- flow_due_jobs --
-- A key's scheduled jobs in line: their place (an ordering key's first run_at, else the due
-- time), then creation. The claim takes those due by :until from the front.
SELECT id, run_at, flow_rate, flow_period_s, flow_parallelism FROM jobs
WHERE tenant = :tenant AND flow_key = :key AND state = 'scheduled' AND held = 0
ORDER BY coalesce(flow_order_at, run_at), created_at, id
LIMIT :limit

-- flow_running --
-- Claimed ahead or started: both hold a place of the key's parallelism.
SELECT count(*) FROM jobs WHERE tenant = :tenant AND flow_key = :key AND state = 'running'

-- flow_start --
-- A flow job claimed for its reserved start slot (:start, the attempt's start).
UPDATE jobs
SET state = 'running',
    attempts = attempts + 1,
    leased_by = :worker_id,
    attempt_started_at = :start,
    lease_expires_at = :lease_until,
    updated_at = :now
WHERE id = :id AND state = 'scheduled'
RETURNING {job_columns}

-- flow_key_moved --
UPDATE flow_keys SET next_start_at = :next WHERE tenant = :tenant AND flow_key = :key

-- complete_jobs --
-- A batch of completions in one statement: :rows is a JSON array of
-- [id, worker_id, attempt, retry, final_state, retry_at, error] (one per job). retry is 1 for
-- an outcome that schedules another attempt (it fails instead when the attempts are spent);
-- final_state is the state of any other outcome. One statement, not one per completion: the
-- work of a statement per row (binding, stepping, resetting) made a batch cost a half more.
UPDATE jobs
SET state = CASE
        WHEN c.retry AND jobs.attempts < jobs.max_attempts THEN 'scheduled'
        ELSE c.final_state
    END,
    run_at = CASE WHEN c.retry AND jobs.attempts < jobs.max_attempts THEN c.retry_at ELSE jobs.run_at END,
    lease_expires_at = NULL,
    leased_by = CASE WHEN c.final_state = 'cancelled' THEN jobs.leased_by END,
    attempt_started_at = NULL,
    last_error = coalesce(c.error, jobs.last_error),
    updated_at = :now,
    finished_at = CASE WHEN c.retry AND jobs.attempts < jobs.max_attempts THEN NULL ELSE :now END,
    expires_at = CASE
        WHEN c.retry AND jobs.attempts < jobs.max_attempts THEN NULL
        ELSE :now + CAST(jobs.keep_for_s * 1000000 AS INTEGER)
    END
FROM (
    SELECT value ->> 0 AS id, value ->> 1 AS worker_id, value ->> 2 AS attempt,
           value ->> 3 AS retry, value ->> 4 AS final_state, value ->> 5 AS retry_at,
           value ->> 6 AS error
    FROM json_each(:rows)
) AS c
WHERE jobs.id = c.id AND jobs.state = 'running' AND jobs.leased_by = c.worker_id
  AND jobs.attempts = c.attempt
RETURNING jobs.id, jobs.state

-- set_last_error --
-- The error of an applied completion that holds a NUL, which `complete_jobs`' JSON cannot carry.
UPDATE jobs SET last_error = :error WHERE id = :id

-- was_cancelled_during_attempt --
SELECT 1 FROM jobs
WHERE id = :id AND state = 'cancelled' AND leased_by = :worker_id AND attempts = :attempt

-- insert_run --
INSERT INTO runs (job_id, tenant, attempt, started_at, finished_at, outcome, status_code,
                  duration_ms, response_excerpt, error, worker_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING

-- heartbeat --
-- :keys: 'id:attempt' per held attempt (NULL: any attempt); a lapsed attempt whose job was
-- claimed again, even under the same worker id, is not extended.
UPDATE jobs
SET lease_expires_at = :lease_until
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'running' AND leased_by = :worker_id
  AND (:keys IS NULL OR id || ':' || attempts IN (SELECT value FROM json_each(:keys)))
RETURNING id

-- release --
UPDATE jobs
SET state = 'scheduled',
    attempts = attempts - 1,
    lease_expires_at = NULL,
    leased_by = NULL,
    attempt_started_at = NULL,
    updated_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'running' AND leased_by = :worker_id

-- expired_leases --
-- The rescue of lost leases (see recoup.storage.rules; PostgreSQL's `rescue_expired` is the
-- same rule in one statement): the batch, then its runs, then its jobs, under one write lock.
SELECT id
FROM jobs
WHERE state = 'running' AND lease_expires_at < :now
ORDER BY lease_expires_at
LIMIT :limit

-- log_lost_attempts --
-- One `lost` run per job of :ids, logged before `rescue_jobs` clears the lease it names.
-- :session is 1 when the jobs' worker is gone (a dead worker's jobs handed back), 0 when their
-- leases expired.
INSERT INTO runs (job_id, tenant, attempt, started_at, finished_at, outcome, status_code,
                  duration_ms, response_excerpt, error, worker_id)
SELECT id, tenant, attempts, min(coalesce(attempt_started_at, updated_at), :now), :now, 'lost',
       NULL, max(0, :now - coalesce(attempt_started_at, updated_at)) / 1000.0, NULL,
       CASE WHEN :session THEN {lost_session_error} ELSE {lost_error} END, leased_by
FROM jobs
WHERE id IN (SELECT value FROM json_each(:ids))
ON CONFLICT DO NOTHING

-- rescue_jobs --
-- A lost attempt never consumes the last one (the worker may have died before starting it):
-- a job whose lost attempt was its last gets one more, up to the ceiling of attempts
-- (CHECK on max_attempts), which bounds a job that kills every worker that runs it.
UPDATE jobs
SET state = CASE WHEN attempts < {attempts_ceiling} THEN 'scheduled' ELSE 'failed' END,
    max_attempts = max(max_attempts, min(attempts + 1, {attempts_ceiling})),
    run_at = CASE WHEN attempts < {attempts_ceiling} THEN :now ELSE run_at END,
    lease_expires_at = NULL,
    leased_by = NULL,
    attempt_started_at = NULL,
    last_error = CASE WHEN :session THEN {lost_session_error} ELSE {lost_error} END,
    updated_at = :now,
    finished_at = CASE WHEN attempts < {attempts_ceiling} THEN NULL ELSE :now END,
    expires_at = CASE
        WHEN attempts < {attempts_ceiling} THEN NULL
        ELSE :now + CAST(keep_for_s * 1000000 AS INTEGER)
    END
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'running'
  AND (:session OR lease_expires_at < :now)

-- running_jobs_of_workers --
-- A dead worker's jobs (or a worker id's previous session's), to hand back by the rule above.
SELECT id, leased_by FROM jobs
WHERE state = 'running' AND leased_by IN (SELECT value FROM json_each(:workers))

-- get_worker --
SELECT pid, process_key, heartbeat_at FROM workers WHERE id = :id

-- get_own_worker --
SELECT 1 FROM workers WHERE id = :id AND pid = :pid AND process_key IS :process_key

-- register_worker --
INSERT INTO workers (id, host, pid, process_key, started_at, heartbeat_at)
VALUES (:id, :host, :pid, :process_key, :now, :now)
ON CONFLICT (id) DO UPDATE
SET host = excluded.host, pid = excluded.pid, process_key = excluded.process_key,
    started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at

-- beat_worker --
-- Only while the registration is still this process's (not taken over by a restart).
UPDATE workers SET heartbeat_at = :now
WHERE id = :id AND pid = :pid AND process_key IS :process_key
RETURNING 1

-- worker_liveness --
SELECT id, pid, process_key, heartbeat_at FROM workers

-- delete_workers --
DELETE FROM workers WHERE id IN (SELECT value FROM json_each(:ids))

-- delete_own_worker --
-- A graceful end: the registration only while it is still this process's.
DELETE FROM workers WHERE id = :id AND pid = :pid AND process_key IS :process_key

-- list_workers --
SELECT id, host, pid, process_key, started_at, heartbeat_at FROM workers
ORDER BY started_at, id

-- bump_wakeups --
-- Other processes' idle workers poll this counter (SqliteStore.wait_for_notify).
UPDATE wakeups SET seq = seq + 1 WHERE id = 1

-- wake_seq --
SELECT seq FROM wakeups WHERE id = 1

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
        WHERE state = 'scheduled' AND held = 0 AND flow_key IS NULL AND {_enabled_tenant}
        ORDER BY run_at
        LIMIT 1
    ) AS plain
    UNION ALL
    SELECT CASE WHEN f.next_start_at > h.run_at THEN f.next_start_at ELSE h.run_at END
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
    updated_at = :now,
    finished_at = :now,
    expires_at = :now + CAST(keep_for_s * 1000000 AS INTEGER)

-- cancel_job --
UPDATE jobs
{_cancel_set}
WHERE tenant = :tenant AND id = :id AND state IN ('scheduled', 'running')

-- cancel_unbegun_job --
-- As cancel_job, for a job never claimed: one running, or back to scheduled after an attempt
-- (a retry, a rescue), is left to finish and returned as it is.
UPDATE jobs
{_cancel_set}
WHERE tenant = :tenant AND id = :id AND state = 'scheduled' AND attempts = 0

-- cancel_by_name --
UPDATE jobs
{_cancel_set}
WHERE tenant = :tenant AND name = :name AND state IN ('scheduled', 'running')

-- cancel_by_prefix --
-- A byte-wise range (SQLite's BINARY collation) walks the live-name index; U+10FFFF is the
-- greatest code point, so every name that starts with :prefix sorts before :prefix || it.
UPDATE jobs
{_cancel_set}
WHERE tenant = :tenant
  AND name >= :prefix AND name < :prefix || char(1114111)
  AND state IN ('scheduled', 'running')

-- cancel_group --
-- Exact equality, never a prefix. Pinned to the partial index of live grouped jobs: with no
-- statistics SQLite would take jobs_group, which also holds the group's finished jobs.
UPDATE jobs INDEXED BY jobs_live_group
{_cancel_set}
WHERE tenant = :tenant AND job_group = :group AND state IN ('scheduled', 'running')

-- cancel_schedule_jobs --
UPDATE jobs
{_cancel_set}
WHERE schedule_id = :schedule_id AND state IN ('scheduled', 'running')

-- _metadata_matches --
-- Every pair of the filter :metadata (a JSON object) is in the row's metadata. Keys are plain
-- path steps (`recoup.jobs.metadata.KEY_PATTERN`: no quote), so quoting them is safe.
NOT EXISTS (SELECT 1 FROM json_each(:metadata) AS wanted
            WHERE json_extract(metadata, '$."' || wanted.key || '"') IS NOT wanted.value)

-- _list_filters --
-- The optional filters of a listing, newest first; the cursor is the (created_at, id) of the
-- last row of the previous page.
  AND (:state IS NULL OR state = :state)
  AND (:prefix IS NULL OR (name >= :prefix AND name < :prefix || char(1114111)))
  AND (:schedule_id IS NULL OR schedule_id = :schedule_id)
  AND (:name IS NULL OR name = :name)
  AND (:metadata IS NULL OR {_metadata_matches})
  AND (:cursor_created IS NULL
       OR created_at < :cursor_created
       OR (created_at = :cursor_created AND id < :cursor_id))
ORDER BY created_at DESC, id DESC
LIMIT :limit

-- list_jobs --
SELECT {job_columns} FROM jobs
WHERE tenant = :tenant
{_list_filters}

-- list_group_jobs --
-- A plain equality on the group walks the index (tenant, job_group, created_at, id), which
-- `:group IS NULL OR job_group = :group` would not: SQLite plans before it sees the value.
SELECT {job_columns} FROM jobs
WHERE tenant = :tenant AND job_group = :group
{_list_filters}

-- list_named_jobs --
-- The jobs of exactly one name through the index (tenant, name, created_at), as for a group.
SELECT {job_columns} FROM jobs
WHERE tenant = :tenant AND name = :name
{_list_filters}

-- list_metadata_jobs --
-- Jobs carrying the pairs of a metadata filter, newest first through the index of the
-- tenant's jobs that carry metadata (jobs_metadata), each tested by json_extract.
SELECT {job_columns} FROM jobs INDEXED BY jobs_metadata
WHERE tenant = :tenant AND metadata <> '{}'
{_list_filters}

-- update_scheduled_job --
-- A PATCH: only while the job is scheduled and has never started (a claim makes it running
-- first, under the same write lock), in one statement.
UPDATE jobs
SET run_at = :run_at, target = :target, name = :name, max_attempts = :max_attempts,
    min_backoff_s = :min_backoff_s, max_backoff_s = :max_backoff_s, jitter = :jitter,
    timeout_s = :timeout_s, metadata = :metadata, updated_at = :now
WHERE tenant = :tenant AND id = :id AND state = 'scheduled' AND attempts = 0
RETURNING {job_columns}

-- runs --
SELECT job_id, tenant, attempt, started_at, finished_at, outcome, status_code, duration_ms,
       response_excerpt, error, worker_id
FROM runs
WHERE tenant = :tenant AND job_id = :job_id
ORDER BY attempt

-- list_runs --
-- A page of the run log, first attempt first; the cursor is the last attempt of the previous
-- page (attempts key the log with the job id).
SELECT job_id, tenant, attempt, started_at, finished_at, outcome, status_code, duration_ms,
       response_excerpt, error, worker_id
FROM runs
WHERE tenant = :tenant AND job_id = :job_id AND attempt > :after_attempt
ORDER BY attempt
LIMIT :limit

-- count_by_state --
SELECT state, count(*) FROM jobs GROUP BY state

-- count_live --
-- Each count walks its state's partial indexes (jobs_due and jobs_held, jobs_leases), never
-- finished rows; held jobs (of disabled tenants) are scheduled too.
SELECT 'scheduled',
       (SELECT count(*) FROM jobs WHERE state = 'scheduled' AND held = 0 AND flow_key IS NULL)
       + (SELECT count(*) FROM jobs
          WHERE state = 'scheduled' AND held = 0 AND flow_key IS NOT NULL)
       + (SELECT count(*) FROM jobs WHERE state = 'scheduled' AND held = 1)
UNION ALL
SELECT 'running', count(*) FROM jobs WHERE state = 'running'

-- count_by_state_of_tenant --
SELECT state, count(*) FROM jobs WHERE tenant = :tenant GROUP BY state

-- count_by_tenant --
SELECT tenant, state, count(*) FROM jobs GROUP BY tenant, state

-- due_backlog --
-- Served by the partial index of scheduled jobs on run_at.
-- Held jobs (of disabled tenants) are not: nothing fires them.
SELECT (SELECT count(*) FROM jobs
        WHERE state = 'scheduled' AND held = 0 AND flow_key IS NULL AND run_at <= :now)
       + (SELECT count(*) FROM jobs
          WHERE state = 'scheduled' AND held = 0 AND flow_key IS NOT NULL AND run_at <= :now)

-- prune_jobs --
DELETE FROM jobs
WHERE id IN (SELECT id FROM jobs WHERE expires_at <= :now ORDER BY expires_at LIMIT :limit)

-- prune_runs --
DELETE FROM runs
WHERE rowid IN (SELECT rowid FROM runs WHERE finished_at < :before ORDER BY finished_at LIMIT :limit)

-- insert_schedule --
INSERT INTO schedules (id, tenant, name, rule, target, payload, max_attempts, min_backoff_s,
                       max_backoff_s, jitter, timeout_s, missed, paused, next_fire_at,
                       created_at, updated_at, metadata, start_at, end_at, flow,
                       traceparent, tracestate)
VALUES (:id, :tenant, :name, :rule, :target, :payload, :max_attempts, :min_backoff_s,
        :max_backoff_s, :jitter, :timeout_s, :missed, 0, :next_fire_at, :now, :now, :metadata,
        :start_at, :end_at, :flow, :traceparent, :tracestate)
ON CONFLICT DO NOTHING
RETURNING {schedule_columns}

-- get_schedule --
SELECT {schedule_columns} FROM schedules WHERE tenant = :tenant AND id = :id

-- list_schedules --
-- By name through the index of live names (tenant, name); the cursor is the last name of the
-- previous page (unique among the tenant's live schedules).
SELECT {schedule_columns} FROM schedules
WHERE tenant = :tenant AND deleted_at IS NULL
  AND (:paused IS NULL OR paused = :paused)
  AND (:ended IS NULL OR (next_fire_at IS NULL) = :ended)
  AND (:name IS NULL OR name = :name)
  AND (:metadata IS NULL OR {_metadata_matches})
  AND (:after_name IS NULL OR name > :after_name)
ORDER BY name
LIMIT :limit

-- set_schedule_paused --
UPDATE schedules
SET paused = :paused,
    next_fire_at = CASE WHEN :paused = 0 AND :next_fire_at IS NOT NULL
                        THEN :next_fire_at ELSE next_fire_at END,
    updated_at = :now
WHERE tenant = :tenant AND id = :id AND deleted_at IS NULL
RETURNING {schedule_columns}

-- delete_schedule --
UPDATE schedules
SET deleted_at = :now, updated_at = :now
WHERE tenant = :tenant AND id = :id AND deleted_at IS NULL

-- due_schedules --
SELECT {schedule_columns} FROM schedules
WHERE paused = 0 AND deleted_at IS NULL AND next_fire_at <= :until
  AND {_enabled_tenant}
ORDER BY next_fire_at
LIMIT :limit

-- advance_schedule --
UPDATE schedules
SET next_fire_at = :new_next, updated_at = :now
WHERE id = :id AND next_fire_at = :expected_next AND paused = 0 AND deleted_at IS NULL
  AND (:revision IS NULL OR revision = :revision)

-- redrive_job --
-- A job that failed for good, scheduled again now with a fresh budget of attempts: the budget
-- it was created with (attempt_budget, kept by its first redrive), up to the ceiling (its
-- attempt numbers and run log continue). Nothing (no row) unless it failed, is below the
-- ceiling and its name is free among live jobs.
UPDATE jobs
SET state = 'scheduled',
    max_attempts = min(attempts + coalesce(attempt_budget, max_attempts), {attempts_ceiling}),
    attempt_budget = coalesce(attempt_budget, max_attempts),
    run_at = :now,
    lease_expires_at = NULL,
    leased_by = NULL,
    attempt_started_at = NULL,
    updated_at = :now,
    finished_at = NULL,
    expires_at = NULL
WHERE tenant = :tenant AND id = :id AND state = 'failed' AND attempts < {attempts_ceiling}
  AND (name IS NULL OR NOT EXISTS (
      SELECT 1 FROM jobs AS live
      WHERE live.tenant = :tenant AND live.name = jobs.name
        AND live.state IN ('scheduled', 'running')))
RETURNING {job_columns}

-- delete_failed_job --
-- A job that failed for good, removed (QStash's DLQ delete); its run log stays until pruned.
DELETE FROM jobs WHERE tenant = :tenant AND id = :id AND state = 'failed'

-- replace_schedule --
-- A PATCH of a schedule: its whole definition, compare-and-set on the revision read.
UPDATE schedules
SET name = :name, rule = :rule, target = :target, max_attempts = :max_attempts,
    min_backoff_s = :min_backoff_s, max_backoff_s = :max_backoff_s, jitter = :jitter,
    timeout_s = :timeout_s, missed = :missed, paused = :paused, next_fire_at = :next_fire_at,
    metadata = :metadata, start_at = :start_at, end_at = :end_at, revision = revision + 1,
    updated_at = :now
WHERE tenant = :tenant AND id = :id AND deleted_at IS NULL AND revision = :expected_revision
RETURNING {schedule_columns}

-- delete_pending_occurrences --
-- The jobs a schedule materialised ahead that have not started, for occurrences after now:
-- made from the old definition, they go, and the schedule materialises them again.
DELETE FROM jobs
WHERE schedule_id = :schedule_id AND state = 'scheduled' AND attempts = 0
  AND occurrence_at > :now

-- replace_unstarted_job --
-- on_conflict "replace": every field of a new job but its id, idempotency key and creation,
-- only while the job is scheduled and has never started (as update_scheduled_job).
UPDATE jobs
SET run_at = :run_at, target = :target, payload = :payload, name = :name,
    max_attempts = :max_attempts, min_backoff_s = :min_backoff_s,
    max_backoff_s = :max_backoff_s, jitter = :jitter, timeout_s = :timeout_s,
    keep_for_s = :keep_for_s, job_group = :job_group, metadata = :metadata,
    flow_key = :flow_key, flow_rate = :flow_rate, flow_period_s = :flow_period_s,
    flow_parallelism = :flow_parallelism, flow_order = :flow_order,
    flow_order_at = :flow_order_at, updated_at = :now
WHERE tenant = :tenant AND id = :id AND state = 'scheduled' AND attempts = 0
RETURNING {job_columns}

-- get_job_for_update --
-- The job a PATCH reads, under the write lock a claim needs too.
SELECT {job_columns} FROM jobs WHERE tenant = :tenant AND id = :id

-- live_schedule_by_name --
SELECT id FROM schedules
WHERE tenant = :tenant AND name = :name AND deleted_at IS NULL
