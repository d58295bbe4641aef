-- Recoup on PostgreSQL, version 19: a schedule's trace context.

-- W3C Trace Context of the request that created the schedule (`recoup.jobs.trace_context`,
-- checked there), given to every job it fires; NULL when none was given. Nullable columns
-- without a default: adding them rewrites no row.
ALTER TABLE schedules ADD COLUMN traceparent text;
ALTER TABLE schedules ADD COLUMN tracestate text
    CHECK (tracestate IS NULL OR traceparent IS NOT NULL);
