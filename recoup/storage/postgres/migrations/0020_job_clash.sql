-- Recoup on PostgreSQL, version 20: the error that undoes a keyed job creation's claim.
--
-- `create_job_keyed` (queries.sql) claims the request's idempotency key and inserts its job in
-- one statement; when the job then clashes with another (its job key, its name), the claim
-- must be undone with it, and only an error undoes a statement. This function raises that
-- error under a code of its own (class P0, PL/pgSQL's), which the caller
-- (`recoup.storage.postgres.job_creation`) tells from every other error by that code alone.
-- VOLATILE (the default, said here because it matters): the planner never evaluates it ahead
-- of the CASE that calls it, so it runs only for a clash. It returns boolean only to have a
-- type for the column that calls it; it never returns.
CREATE FUNCTION recoup_job_clashed() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'P0C01',
        MESSAGE = 'recoup: job clashed, key undone',
        HINT = 'the job clashed with another after its idempotency key was claimed';
END
$$;
