-- Named queries of the HTTP API's tables on SQLite (see migrations/0002_api.sql).
-- Instants are integer microseconds since the epoch (UTC).

-- claim_key --
-- The primary key decides a race between concurrent first requests: one insert wins.
INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, created_at, locked_at)
VALUES (:tenant, :key, :fingerprint, :method, :path, :now, :now)
ON CONFLICT (tenant, key) DO NOTHING

-- get_key --
SELECT fingerprint, locked_at, status, content_type, body
FROM idempotency_keys WHERE tenant = :tenant AND key = :key

-- take_over_key --
-- Compare-and-set on the stale lock: of two takers, one changes the row.
UPDATE idempotency_keys SET locked_at = :now
WHERE tenant = :tenant AND key = :key AND status IS NULL AND locked_at = :locked_at

-- complete_key --
-- Only by the lock's holder: a request whose key was taken over (its lock went stale) must not
-- overwrite the taker's result.
UPDATE idempotency_keys
SET status = :status, content_type = :content_type, body = :body, locked_at = NULL
WHERE tenant = :tenant AND key = :key AND status IS NULL AND locked_at = :locked_at

-- release_key --
-- Only by the lock's holder, as complete_key.
DELETE FROM idempotency_keys
WHERE tenant = :tenant AND key = :key AND status IS NULL AND locked_at = :locked_at

-- prune_keys --
DELETE FROM idempotency_keys WHERE rowid IN (
    SELECT rowid FROM idempotency_keys WHERE created_at < :before ORDER BY created_at LIMIT :limit
)

-- insert_token --
INSERT INTO api_tokens (id, tenant, token_hash, prefix, label, created_at)
VALUES (:id, :tenant, :token_hash, :prefix, :label, :now)
RETURNING id, tenant, prefix, label, created_at, revoked_at

-- token_owner --
-- The token's tenant row is joined for its state (a token whose tenant has no row, possible only
-- in databases of versions before 7 on SQLite, reads as enabled).
-- With the epoch of migration 0018, read in the same snapshot (`recoup.api.token_cache`).
SELECT k.tenant, t.disabled_at IS NOT NULL, (SELECT epoch FROM auth_epoch WHERE id = 1)
FROM api_tokens k LEFT JOIN tenants t ON t.id = k.tenant
WHERE k.token_hash = :token_hash AND k.revoked_at IS NULL

-- token_epoch --
-- The counter every change to who may act bumps (migration 0018): `recoup.api.token_cache`.
SELECT epoch FROM auth_epoch WHERE id = 1

-- list_tokens --
SELECT id, tenant, prefix, label, created_at, revoked_at FROM api_tokens
WHERE :tenant IS NULL OR tenant = :tenant
ORDER BY created_at, id

-- revoke_token --
UPDATE api_tokens SET revoked_at = max(created_at, :now) WHERE id = :id AND revoked_at IS NULL

-- get_token --
SELECT id, tenant, prefix, label, created_at, revoked_at FROM api_tokens WHERE id = :id

-- end_session --
INSERT INTO ended_sessions (nonce, expires_at) VALUES (:nonce, :expires_at)
ON CONFLICT (nonce) DO NOTHING

-- session_ended --
SELECT 1 FROM ended_sessions WHERE nonce = :nonce

-- prune_ended_sessions --
DELETE FROM ended_sessions WHERE expires_at < :before

-- record_action --
INSERT INTO operator_actions (id, tenant, subject, subject_id, action, who, at, detail)
VALUES (:id, :tenant, :subject, :subject_id, :action, :who, :at, :detail)

-- actions_on --
SELECT tenant, subject, subject_id, action, who, at, detail FROM operator_actions
WHERE tenant = :tenant AND subject = :subject AND subject_id = :subject_id
ORDER BY at, id
