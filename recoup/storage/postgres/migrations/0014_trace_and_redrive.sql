-- Recoup on PostgreSQL, version 14: a job's trace context, and the budget a redrive restores.

-- W3C Trace Context of the request that created the job (`recoup.jobs.trace_context`, checked
-- there), sent on every delivery; NULL when none was given. Nullable columns without a default:
-- adding them rewrites no row.
ALTER TABLE jobs ADD COLUMN traceparent text;
ALTER TABLE jobs ADD COLUMN tracestate text CHECK (tracestate IS NULL OR traceparent IS NOT NULL);

-- The attempts a job was created with, kept by its first redrive (NULL until then: max_attempts
-- still is that budget), so every redrive gives that budget again rather than doubling the last.
ALTER TABLE jobs ADD COLUMN attempt_budget int CHECK (attempt_budget IS NULL OR attempt_budget >= 1);
