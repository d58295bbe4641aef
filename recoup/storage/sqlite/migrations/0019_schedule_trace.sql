-- Recoup on SQLite, version 19: a schedule's trace context.

-- W3C Trace Context of the request that created the schedule (`recoup.jobs.trace_context`,
-- checked there), given to every job it fires; NULL when none was given.
ALTER TABLE schedules ADD COLUMN traceparent TEXT;
ALTER TABLE schedules ADD COLUMN tracestate TEXT
    CHECK (tracestate IS NULL OR traceparent IS NOT NULL);
