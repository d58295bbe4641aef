-- Recoup on SQLite, version 1: tenants, jobs, runs, schedules.
-- Instants are INTEGER microseconds since the Unix epoch, UTC (compact, sortable, exact);
-- durations are REAL seconds (`*_s`); JSON is TEXT; booleans are 0/1.
-- STRICT tables make SQLite refuse values of the wrong type, as PostgreSQL does.

CREATE TABLE tenants (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    signing_secret TEXT NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    name TEXT,
    run_at INTEGER NOT NULL,
    target TEXT NOT NULL CHECK (json_valid(target)),
    payload TEXT CHECK (payload IS NULL OR json_valid(payload)),
    idempotency_key TEXT,
    max_attempts INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
    min_backoff_s REAL NOT NULL CHECK (min_backoff_s >= 0),
    max_backoff_s REAL NOT NULL CHECK (max_backoff_s >= min_backoff_s),
    jitter INTEGER NOT NULL CHECK (jitter IN (0, 1)),
    timeout_s REAL NOT NULL CHECK (timeout_s > 0),
    keep_for_s REAL CHECK (keep_for_s IS NULL OR keep_for_s >= 0),
    schedule_id TEXT,
    -- the occurrence a schedule's job stands for: its first run_at, never changed (retries and
    -- rescues move run_at, so run_at cannot identify the occurrence)
    occurrence_at INTEGER,
    state TEXT NOT NULL DEFAULT 'scheduled'
        CHECK (state IN ('scheduled', 'running', 'succeeded', 'failed', 'cancelled')),
    attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0 AND attempts <= max_attempts),
    lease_expires_at INTEGER,
    leased_by TEXT,
    -- when the current (or, once cancelled, the last) attempt was due to start: the run log's
    -- started_at for an attempt lost in a crash
    attempt_started_at INTEGER,
    last_error TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    finished_at INTEGER,
    -- finished_at + keep_for: when pruning may delete the job (NULL: kept, or still live)
    expires_at INTEGER,
    CONSTRAINT running_iff_leased CHECK ((state = 'running') = (lease_expires_at IS NOT NULL)),
    CONSTRAINT running_has_worker CHECK (state <> 'running' OR leased_by IS NOT NULL),
    CONSTRAINT running_has_attempt CHECK (state <> 'running' OR attempts >= 1),
    -- a scheduled job always has an attempt left, so a claim can never overrun max_attempts
    CONSTRAINT scheduled_has_attempt_left CHECK (state <> 'scheduled' OR attempts < max_attempts),
    CONSTRAINT final_iff_finished
        CHECK ((state IN ('succeeded', 'failed', 'cancelled')) = (finished_at IS NOT NULL)),
    CONSTRAINT expires_only_when_finished CHECK (expires_at IS NULL OR finished_at IS NOT NULL),
    CONSTRAINT occurrence_iff_scheduled
        CHECK ((schedule_id IS NULL) = (occurrence_at IS NULL))
) STRICT;

-- Due jobs: the claim walks this in run_at order; finished jobs never enter it, so claims
-- cost the same with millions of final rows.
CREATE INDEX jobs_due ON jobs (run_at) WHERE state = 'scheduled';
-- A name is unique among the live jobs of a tenant; finished jobs free it.
CREATE UNIQUE INDEX jobs_live_name ON jobs (tenant, name)
    WHERE state IN ('scheduled', 'running') AND name IS NOT NULL;
CREATE INDEX jobs_name ON jobs (tenant, name, created_at) WHERE name IS NOT NULL;
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- One job per schedule occurrence, whatever two schedulers do. On occurrence_at, not run_at:
-- two occurrences retried or rescued to the same instant stay two jobs.
CREATE UNIQUE INDEX jobs_schedule_occurrence ON jobs (schedule_id, occurrence_at)
    WHERE schedule_id IS NOT NULL;
CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX jobs_expiry ON jobs (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX jobs_listing ON jobs (tenant, created_at, id);

-- The run log: one row per attempt, kept after its job is pruned (no foreign key).
CREATE TABLE runs (
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL CHECK (attempt >= 1),
    tenant TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    outcome TEXT NOT NULL
        CHECK (outcome IN ('succeeded', 'retry', 'failed', 'lost', 'cancelled')),
    status_code INTEGER CHECK (status_code IS NULL OR status_code BETWEEN 100 AND 599),
    duration_ms REAL NOT NULL CHECK (duration_ms >= 0),
    response_excerpt TEXT,
    error TEXT,
    worker_id TEXT,
    PRIMARY KEY (job_id, attempt)
) STRICT;

CREATE INDEX runs_finished ON runs (finished_at);

CREATE TABLE schedules (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    rule TEXT NOT NULL CHECK (json_valid(rule)),
    target TEXT NOT NULL CHECK (json_valid(target)),
    payload TEXT CHECK (payload IS NULL OR json_valid(payload)),
    max_attempts INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
    min_backoff_s REAL NOT NULL CHECK (min_backoff_s >= 0),
    max_backoff_s REAL NOT NULL CHECK (max_backoff_s >= min_backoff_s),
    jitter INTEGER NOT NULL CHECK (jitter IN (0, 1)),
    timeout_s REAL NOT NULL CHECK (timeout_s > 0),
    missed TEXT NOT NULL CHECK (missed IN ('skip', 'run_once', 'run_all')),
    paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    next_fire_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    deleted_at INTEGER
) STRICT;

CREATE UNIQUE INDEX schedules_live_name ON schedules (tenant, name) WHERE deleted_at IS NULL;
CREATE INDEX schedules_due ON schedules (next_fire_at)
    WHERE paused = 0 AND deleted_at IS NULL AND next_fire_at IS NOT NULL;

-- Inserts bump this counter so idle workers in other processes wake without a fixed long poll
-- (SQLite has no LISTEN/NOTIFY; see SqliteStore.wait_for_notify).
CREATE TABLE wakeups (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
) STRICT;

INSERT INTO wakeups (id, seq) VALUES (1, 0);
