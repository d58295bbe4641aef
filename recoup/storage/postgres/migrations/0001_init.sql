-- Recoup on PostgreSQL, version 1: tenants, jobs, runs, schedules.
-- Runs with search_path set to the store's schema. Instants are timestamptz; durations are
-- double precision seconds (`*_s`); target, payload and rules are jsonb. Identifiers and names
-- use the "C" collation: byte order makes prefix ranges (cancel by name prefix) index scans
-- and comparisons cheap, whatever the database's default collation.

CREATE TABLE tenants (
    id text COLLATE "C" PRIMARY KEY,
    name text NOT NULL,
    signing_secret text NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE jobs (
    id text COLLATE "C" PRIMARY KEY,
    tenant text COLLATE "C" NOT NULL,
    name text COLLATE "C",
    run_at timestamptz NOT NULL,
    target jsonb NOT NULL,
    payload jsonb,
    idempotency_key text COLLATE "C",
    max_attempts integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
    min_backoff_s double precision NOT NULL CHECK (min_backoff_s >= 0),
    max_backoff_s double precision NOT NULL CHECK (max_backoff_s >= min_backoff_s),
    jitter boolean NOT NULL,
    timeout_s double precision NOT NULL CHECK (timeout_s > 0),
    keep_for_s double precision CHECK (keep_for_s IS NULL OR keep_for_s >= 0),
    schedule_id text COLLATE "C",
    -- the occurrence a schedule's job stands for: its first run_at, never changed (retries and
    -- rescues move run_at, so run_at cannot identify the occurrence)
    occurrence_at timestamptz,
    state text NOT NULL DEFAULT 'scheduled'
        CHECK (state IN ('scheduled', 'running', 'succeeded', 'failed', 'cancelled')),
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0 AND attempts <= max_attempts),
    lease_expires_at timestamptz,
    leased_by text,
    -- when the current (or, once cancelled, the last) attempt was due to start: the run log's
    -- started_at for an attempt lost in a crash
    attempt_started_at timestamptz,
    last_error text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    finished_at timestamptz,
    -- finished_at + keep_for: when pruning may delete the job (NULL: kept, or still live)
    expires_at timestamptz,
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
);

-- Rows are updated several times in their short life (claim, heartbeat, completion): leave room
-- on each page for HOT updates, which skip index maintenance.
ALTER TABLE jobs SET (fillfactor = 80);

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
    job_id text COLLATE "C" NOT NULL,
    attempt integer NOT NULL CHECK (attempt >= 1),
    tenant text COLLATE "C" NOT NULL,
    started_at timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    outcome text NOT NULL
        CHECK (outcome IN ('succeeded', 'retry', 'failed', 'lost', 'cancelled')),
    status_code integer CHECK (status_code IS NULL OR status_code BETWEEN 100 AND 599),
    duration_ms double precision NOT NULL CHECK (duration_ms >= 0),
    response_excerpt text,
    error text,
    worker_id text,
    PRIMARY KEY (job_id, attempt)
);

CREATE INDEX runs_finished ON runs (finished_at);

CREATE TABLE schedules (
    id text COLLATE "C" PRIMARY KEY,
    tenant text COLLATE "C" NOT NULL,
    name text COLLATE "C" NOT NULL,
    rule jsonb NOT NULL,
    target jsonb NOT NULL,
    payload jsonb,
    max_attempts integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
    min_backoff_s double precision NOT NULL CHECK (min_backoff_s >= 0),
    max_backoff_s double precision NOT NULL CHECK (max_backoff_s >= min_backoff_s),
    jitter boolean NOT NULL,
    timeout_s double precision NOT NULL CHECK (timeout_s > 0),
    missed text NOT NULL CHECK (missed IN ('skip', 'run_once', 'run_all')),
    paused boolean NOT NULL DEFAULT false,
    next_fire_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz
);

CREATE UNIQUE INDEX schedules_live_name ON schedules (tenant, name) WHERE deleted_at IS NULL;
CREATE INDEX schedules_due ON schedules (next_fire_at)
    WHERE NOT paused AND deleted_at IS NULL AND next_fire_at IS NOT NULL;

-- Wake idle workers: one notification per inserting statement (not per row), on the channel
-- `<schema>_jobs`, carrying the earliest run_at of any scheduled job (ISO 8601, UTC), so a
-- worker learns when to wake next. The function keeps the search_path it was created with.
CREATE FUNCTION notify_jobs() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_notify(
        TG_TABLE_SCHEMA || '_jobs',
        coalesce(
            to_char(
                (SELECT min(run_at) FROM jobs WHERE state = 'scheduled') AT TIME ZONE 'UTC',
                'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'
            ),
            ''
        )
    );
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_notify AFTER INSERT ON jobs FOR EACH STATEMENT EXECUTE FUNCTION notify_jobs();
