-- Version 6: worker sessions (ARCHITECTURE.md, 'Worker sessions').
--
-- A running worker registers here and stamps `heartbeat_at` twice a second (INTEGER
-- microseconds of the machine's clock, which every process on one SQLite file shares). Another
-- worker on the same machine finds a dead one by its process (`process_key`, see
-- recoup.jobs.processes: gone, a zombie, or its PID reused) and hands its jobs back at once;
-- one it cannot look up (another PID namespace) is dead once its heartbeat is older than the
-- rule's `dead_after`.
CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    process_key TEXT,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
) STRICT;
