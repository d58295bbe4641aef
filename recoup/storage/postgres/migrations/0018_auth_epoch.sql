-- Version 18 (the API's hot path, issue 21): a counter of changes to who may act.
--
-- The API keeps the owners of the tokens it has seen in memory (`recoup.api.token_cache`) and,
-- instead of reading a token and its tenant on every request, reads this one row: any change
-- that could refuse a token (a revocation, a deleted token, a tenant disabled, enabled or
-- deleted) bumps it, through the triggers below (once per statement), whichever process,
-- host or tool makes the change, so every API process sees it in its next request (READ
-- COMMITTED: a statement sees every commit made before it began) and reads the token afresh.
CREATE TABLE auth_epoch (
    id integer PRIMARY KEY CHECK (id = 1),
    epoch bigint NOT NULL
);
INSERT INTO auth_epoch (id, epoch) VALUES (1, 0);

CREATE FUNCTION bump_auth_epoch() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER api_tokens_changed AFTER UPDATE OF revoked_at, tenant, token_hash OR DELETE
ON api_tokens FOR EACH STATEMENT EXECUTE FUNCTION bump_auth_epoch();

CREATE TRIGGER tenants_access_changed AFTER UPDATE OF disabled_at, id OR DELETE
ON tenants FOR EACH STATEMENT EXECUTE FUNCTION bump_auth_epoch();
