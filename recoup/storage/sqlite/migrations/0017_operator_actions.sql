-- Version 17 (the dashboard's actions, issue 25).
--
-- What a person did by hand from the dashboard (`recoup.tenancy.OperatorAction`): retried or
-- cancelled a job, stopped an invoice's dunning, marked it paid, one row per item of a bulk
-- action; `who` names the token that signed in (its label, else its prefix, never the
-- secret). A job's run log and an invoice's timeline show them where they happened.
CREATE TABLE operator_actions (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    subject TEXT NOT NULL CHECK (subject IN ('job', 'invoice')),
    subject_id TEXT NOT NULL CHECK (subject_id <> ''),
    action TEXT NOT NULL CHECK (action <> ''),
    who TEXT NOT NULL CHECK (who <> ''),
    at INTEGER NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX operator_actions_subject ON operator_actions (tenant, subject, subject_id, at);
