-- Recoup on SQLite, version 10: metadata on jobs and schedules, a schedule's window
-- (start_at, end_at) and its revision.

-- A flat JSON object of string keys to string values (`recoup.jobs.metadata` holds the limits);
-- `{}` when there is none, so that a filter never has to tell NULL from empty.
ALTER TABLE jobs ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}'
    CHECK (json_valid(metadata) AND json_type(metadata) = 'object');
ALTER TABLE schedules ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}'
    CHECK (json_valid(metadata) AND json_type(metadata) = 'object');

-- A listing filtered by metadata walks, newest first, only the tenant's jobs that carry some
-- (json_extract then tests each one's pairs).
CREATE INDEX jobs_metadata ON jobs (tenant, created_at, id) WHERE metadata <> '{}';

-- No occurrence before start_at, none after end_at (either may be NULL: unbounded).
ALTER TABLE schedules ADD COLUMN start_at INTEGER;
ALTER TABLE schedules ADD COLUMN end_at INTEGER
    CHECK (end_at IS NULL OR start_at IS NULL OR end_at >= start_at);
-- Bumped by every change of a schedule's definition (PATCH): materialising is a
-- compare-and-set on it too, so an occurrence planned from the old definition is never
-- inserted after the change.
ALTER TABLE schedules ADD COLUMN revision INTEGER NOT NULL DEFAULT 0 CHECK (revision >= 0);
