-- Version 4: the insert trigger notifies without reading the table.
--
-- Version 1's notify_jobs() carried the earliest scheduled run_at as the payload, computed
-- with `SELECT min(run_at) FROM jobs WHERE state = 'scheduled'` on every inserting statement.
-- No listener reads the payload (a notification only wakes a worker, which then claims), and
-- the subquery cost every single-job insert a plan of its own: PL/pgSQL caches it per session,
-- planned on whatever statistics the table had then (on a new table: a sequential scan), so
-- one enqueue at a time slowed as the table grew (measured: 1,240 jobs/s over 3,000 jobs,
-- 500 over 20,000). Still one notification per inserting statement, on `<schema>_jobs`.
CREATE OR REPLACE FUNCTION notify_jobs() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '_jobs', '');
    RETURN NULL;
END
$$;
