-- Version 15 (reliability, issue 24). (A redrive's budget is 0014's `attempt_budget`.)
--
-- Dashboard sessions ended by a logout (`recoup.api.dashboard.sessions`: the cookie is signed,
-- so without this a copy of it would work until it expires). A session is named by its random
-- nonce; the row is kept until the session would have expired (Unix seconds), then pruned.
CREATE TABLE ended_sessions (
    nonce TEXT PRIMARY KEY,
    expires_at INTEGER NOT NULL
) STRICT;
