-- Recoup on PostgreSQL, version 10: metadata on jobs and schedules, a schedule's window
-- (start_at, end_at) and its revision.

-- A flat JSON object of string keys to string values (`recoup.jobs.metadata` holds the limits);
-- `{}` when there is none. A constant default: adding the column rewrites no row.
ALTER TABLE jobs ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'
    CHECK (jsonb_typeof(metadata) = 'object');
ALTER TABLE schedules ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'
    CHECK (jsonb_typeof(metadata) = 'object');

-- `metadata @> '{"k": "v"}'` (a listing's filter) through GIN, over the jobs that carry some.
CREATE INDEX jobs_metadata ON jobs USING gin (metadata jsonb_path_ops)
    WHERE metadata <> '{}'::jsonb;

-- No occurrence before start_at, none after end_at (either may be NULL: unbounded).
ALTER TABLE schedules ADD COLUMN start_at timestamptz;
ALTER TABLE schedules ADD COLUMN end_at timestamptz
    CHECK (end_at IS NULL OR start_at IS NULL OR end_at >= start_at);
-- Bumped by every change of a schedule's definition (PATCH): materialising is a
-- compare-and-set on it too, so an occurrence planned from the old definition is never
-- inserted after the change.
ALTER TABLE schedules ADD COLUMN revision integer NOT NULL DEFAULT 0 CHECK (revision >= 0);
