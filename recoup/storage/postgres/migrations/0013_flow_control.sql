-- Recoup on PostgreSQL, migration 13: flow control per key (ARCHITECTURE.md, 'Flow control').

-- A job's key and limits (`recoup.jobs.flow`); all NULL for the jobs without one.
ALTER TABLE jobs
    ADD COLUMN flow_key text CHECK (flow_key IS NULL OR length(flow_key) BETWEEN 1 AND 200),
    ADD COLUMN flow_rate integer CHECK (flow_rate IS NULL OR flow_rate >= 1),
    ADD COLUMN flow_period_s double precision CHECK (flow_period_s IS NULL OR flow_period_s > 0),
    ADD COLUMN flow_parallelism integer CHECK (flow_parallelism IS NULL OR flow_parallelism >= 1),
    -- An ordering key is a flow key of parallelism 1 with `flow_order` set: 'hold' (a job
    -- awaiting a retry keeps its place, `flow_order_at`, its first run_at, and holds the ones
    -- behind it) or 'skip' (it goes back in line by its retry's instant).
    ADD COLUMN flow_order text CHECK (flow_order IS NULL OR flow_order IN ('hold', 'skip')),
    ADD COLUMN flow_order_at timestamptz;

-- The claims of jobs without a key walk only theirs: a throttled key's backlog of due jobs
-- is never stepped over by them.
DROP INDEX jobs_due;
CREATE INDEX jobs_due ON jobs (run_at) WHERE state = 'scheduled' AND NOT held AND flow_key IS NULL;
-- A key's due jobs in their order (due time, then creation), and its running ones (counted
-- against its parallelism: at most that many rows per key).
CREATE INDEX jobs_flow_due ON jobs (tenant, flow_key, coalesce(flow_order_at, run_at), created_at, id)
    WHERE state = 'scheduled' AND NOT held AND flow_key IS NOT NULL;
CREATE INDEX jobs_flow_running ON jobs (tenant, flow_key)
    WHERE state = 'running' AND flow_key IS NOT NULL;

-- Per key, the earliest instant its next start may be given (a rate's spacing). A claim locks
-- the rows of the keys it serves (FOR UPDATE SKIP LOCKED: another claimer takes other keys,
-- never waits), so one key's starts are reserved by one claim at a time.
CREATE TABLE flow_keys (
    tenant text NOT NULL,
    flow_key text NOT NULL,
    next_start_at timestamptz,
    PRIMARY KEY (tenant, flow_key)
);

-- A schedule's flow key and limits (`recoup.jobs.flow.FlowLimits`, JSON), given to every job it
-- fires; NULL for none.
ALTER TABLE schedules ADD COLUMN flow jsonb;
