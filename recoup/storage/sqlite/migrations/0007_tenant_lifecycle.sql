-- Version 7: tenants can be disabled and their signing secret rotated with an overlap
-- (recoup.tenancy; `recoup tenants disable|enable|delete|rotate-secret`).
--
-- A disabled tenant's tokens are refused, its schedules do not fire and its jobs are held:
-- they stay `scheduled`, with `held` set, outside the index of due jobs, so that the claims of
-- every other tenant never step over them however long the tenant stays disabled. Enabling it
-- clears `held` and they run (those whose time passed, at once, in run_at order). A job that
-- becomes scheduled again while its tenant is disabled (a retry of an attempt that was running)
-- is not marked: the claim skips every job of a disabled tenant too.
-- From this version every connection runs with `PRAGMA foreign_keys = ON` (SqliteStore).
ALTER TABLE tenants ADD COLUMN disabled_at INTEGER;
-- the secret a rotation replaced, still signing beside the new one until the instant after
ALTER TABLE tenants ADD COLUMN previous_signing_secret TEXT;
ALTER TABLE tenants ADD COLUMN previous_secret_until INTEGER
    CHECK ((previous_signing_secret IS NULL) = (previous_secret_until IS NULL));

-- The claims read the disabled tenants (few, usually none) once per statement.
CREATE INDEX tenants_disabled ON tenants (id) WHERE disabled_at IS NOT NULL;

ALTER TABLE jobs ADD COLUMN held INTEGER NOT NULL DEFAULT 0 CHECK (held IN (0, 1));

DROP INDEX jobs_due;
CREATE INDEX jobs_due ON jobs (run_at) WHERE state = 'scheduled' AND held = 0;
-- A disabled tenant's held jobs, found again when it is enabled (and counted as scheduled).
CREATE INDEX jobs_held ON jobs (tenant) WHERE state = 'scheduled' AND held = 1;
