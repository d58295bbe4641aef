-- Version 18 (the API's hot path, issue 21): a counter of changes to who may act.
--
-- The API keeps the owners of the tokens it has seen in memory (`recoup.api.token_cache`) and,
-- instead of reading a token and its tenant on every request, reads this one row: any change
-- that could refuse a token (a revocation, a deleted token, a tenant disabled, enabled or
-- deleted) bumps it, through the triggers below, whichever process or tool makes the change,
-- so every API process sees it in its next request and reads the token afresh.
CREATE TABLE auth_epoch (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    epoch INTEGER NOT NULL
) STRICT;
INSERT INTO auth_epoch (id, epoch) VALUES (1, 0);

CREATE TRIGGER api_tokens_changed AFTER UPDATE OF revoked_at, tenant, token_hash ON api_tokens
BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

CREATE TRIGGER api_tokens_deleted AFTER DELETE ON api_tokens
BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

CREATE TRIGGER tenants_access_changed AFTER UPDATE OF disabled_at, id ON tenants
BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;

CREATE TRIGGER tenants_deleted AFTER DELETE ON tenants
BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
END;
