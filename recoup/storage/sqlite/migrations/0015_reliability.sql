-- Version 15 (reliability, issue 24).
--
-- The budget of attempts a redrive gives a job (`redrive_job`): as many as the job was created
-- with, written by its first redrive and read by every later one, so that max_attempts grows
-- by that budget each time (3 → 6 → 9) instead of doubling (3 → 6 → 12),
-- which taking the last max_attempts as the budget did. NULL: never redriven (the budget is
-- then max_attempts, which nothing but a redrive or a lost attempt raises).
ALTER TABLE jobs ADD COLUMN redrive_budget INTEGER
    CHECK (redrive_budget IS NULL OR redrive_budget BETWEEN 1 AND 100);

-- Dashboard sessions ended by a logout (`recoup.api.dashboard.sessions`: the cookie is signed,
-- so without this a copy of it would work until it expires). A session is named by its random
-- nonce; the row is kept until the session would have expired (Unix seconds), then pruned.
CREATE TABLE ended_sessions (
    nonce TEXT PRIMARY KEY,
    expires_at INTEGER NOT NULL
) STRICT;
