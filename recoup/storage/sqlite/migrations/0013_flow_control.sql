-- Recoup on SQLite, migration 13: flow control per key (ARCHITECTURE.md, 'Flow control').

-- A job's key and limits (`recoup.jobs.flow`); all NULL for the jobs without one.
ALTER TABLE jobs ADD COLUMN flow_key TEXT CHECK (flow_key IS NULL OR length(flow_key) BETWEEN 1 AND 200);
ALTER TABLE jobs ADD COLUMN flow_rate INTEGER CHECK (flow_rate IS NULL OR flow_rate >= 1);
ALTER TABLE jobs ADD COLUMN flow_period_s REAL CHECK (flow_period_s IS NULL OR flow_period_s > 0);
ALTER TABLE jobs ADD COLUMN flow_parallelism INTEGER
    CHECK (flow_parallelism IS NULL OR flow_parallelism >= 1);
-- An ordering key is a flow key of parallelism 1 with `flow_order` set: 'hold' (a job awaiting
-- a retry keeps its place, `flow_order_at`, its first run_at, and holds the ones behind it) or
-- 'skip' (it goes back in line by its retry's instant).
ALTER TABLE jobs ADD COLUMN flow_order TEXT CHECK (flow_order IS NULL OR flow_order IN ('hold', 'skip'));
ALTER TABLE jobs ADD COLUMN flow_order_at INTEGER;

-- The claims of jobs without a key walk only theirs: a throttled key's backlog of due jobs
-- is never stepped over by them.
DROP INDEX jobs_due;
CREATE INDEX jobs_due ON jobs (run_at) WHERE state = 'scheduled' AND held = 0 AND flow_key IS NULL;
-- A key's due jobs in their order (due time, then creation), and its running ones (counted
-- against its parallelism: at most that many rows per key).
CREATE INDEX jobs_flow_due ON jobs (tenant, flow_key, coalesce(flow_order_at, run_at), created_at, id)
    WHERE state = 'scheduled' AND held = 0 AND flow_key IS NOT NULL;
CREATE INDEX jobs_flow_running ON jobs (tenant, flow_key)
    WHERE state = 'running' AND flow_key IS NOT NULL;

-- Per key, the earliest instant its next start may be given (a rate's spacing); claims
-- reserve start slots from it.
CREATE TABLE flow_keys (
    tenant TEXT NOT NULL,
    flow_key TEXT NOT NULL,
    next_start_at INTEGER,
    PRIMARY KEY (tenant, flow_key)
) WITHOUT ROWID;

-- A schedule's flow key and limits (`recoup.jobs.flow.FlowLimits`, JSON), given to every job it
-- fires; NULL for none.
ALTER TABLE schedules ADD COLUMN flow TEXT CHECK (flow IS NULL OR json_valid(flow));
