-- Version 6: worker sessions (ARCHITECTURE.md, 'Worker sessions').
--
-- A running worker registers here and holds a session-level advisory lock keyed by its id
-- (queries.sql, `_worker_lock`) on a connection of its own for its whole life: a worker
-- killed with SIGKILL loses its connection, hence its lock, at once, and any other worker then
-- hands its jobs back within seconds instead of after their leases. `heartbeat_at` is stamped
-- by the database's clock (`clock_timestamp()`) twice a second; the rule that reads it waits
-- a short grace after the lock is freed, so that a live worker cut off from its connection
-- gives its jobs up first. Instants are the database's, never a worker's due clock.
CREATE TABLE workers (
    id text COLLATE "C" PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    -- recoup.jobs.processes: boot id, PID namespace and start time of the process (SQLite
    -- looks processes up by it; here it only tells people which process it was)
    process_key text,
    started_at timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);

-- Every heartbeat rewrites its row: leave room on the page for HOT updates.
ALTER TABLE workers SET (fillfactor = 50);
