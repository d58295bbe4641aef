-- Named queries of the HTTP API's tables on PostgreSQL (see migrations/0002_api.sql).

-- claim_key --
-- The primary key decides a race between concurrent first requests: one insert wins, the
-- others wait for it to commit and then insert nothing.
INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, created_at, locked_at)
VALUES (%(tenant)s, %(key)s, %(fingerprint)s, %(method)s, %(path)s, %(now)s, %(now)s)
ON CONFLICT (tenant, key) DO NOTHING
RETURNING 1

-- get_key --
SELECT fingerprint, locked_at, status, content_type, body
FROM idempotency_keys WHERE tenant = %(tenant)s AND key = %(key)s

-- take_over_key --
-- Compare-and-set on the stale lock: of two takers, one changes the row.
UPDATE idempotency_keys SET locked_at = %(now)s
WHERE tenant = %(tenant)s AND key = %(key)s AND status IS NULL AND locked_at = %(locked_at)s
RETURNING 1

-- complete_key --
-- Only by the lock's holder: a request whose key was taken over (its lock went stale) must not
-- overwrite the taker's result.
UPDATE idempotency_keys
SET status = %(status)s, content_type = %(content_type)s, body = %(body)s, locked_at = NULL
WHERE tenant = %(tenant)s AND key = %(key)s AND status IS NULL AND locked_at = %(locked_at)s

-- release_key --
-- Only by the lock's holder, as complete_key.
DELETE FROM idempotency_keys
WHERE tenant = %(tenant)s AND key = %(key)s AND status IS NULL AND locked_at = %(locked_at)s

-- prune_keys --
WITH doomed AS (
    SELECT tenant, key FROM idempotency_keys WHERE created_at < %(before)s
    ORDER BY created_at LIMIT %(limit)s
)
DELETE FROM idempotency_keys k USING doomed d
WHERE k.tenant = d.tenant AND k.key = d.key

-- insert_token --
INSERT INTO api_tokens (id, tenant, token_hash, prefix, label, created_at)
VALUES (%(id)s, %(tenant)s, %(token_hash)s, %(prefix)s, %(label)s, %(now)s)
RETURNING id, tenant, prefix, label, created_at, revoked_at

-- token_owner --
-- The token's tenant row is joined for its state (a token whose tenant has no row, possible only
-- in databases of versions before 7 on SQLite, reads as enabled).
-- With the epoch of migration 0018, read in the same snapshot (`recoup.api.token_cache`).
SELECT k.tenant, t.disabled_at IS NOT NULL, (SELECT epoch FROM auth_epoch WHERE id = 1)
FROM api_tokens k LEFT JOIN tenants t ON t.id = k.tenant
WHERE k.token_hash = %(token_hash)s AND k.revoked_at IS NULL

-- token_epoch --
-- The counter every change to who may act bumps (migration 0018): `recoup.api.token_cache`.
SELECT epoch FROM auth_epoch WHERE id = 1

-- list_tokens --
SELECT id, tenant, prefix, label, created_at, revoked_at FROM api_tokens
WHERE %(tenant)s::text IS NULL OR tenant = %(tenant)s
ORDER BY created_at, id

-- revoke_token --
UPDATE api_tokens SET revoked_at = greatest(created_at, %(now)s)
WHERE id = %(id)s AND revoked_at IS NULL

-- get_token --
SELECT id, tenant, prefix, label, created_at, revoked_at FROM api_tokens WHERE id = %(id)s

-- end_session --
INSERT INTO ended_sessions (nonce, expires_at) VALUES (%(nonce)s, %(expires_at)s)
ON CONFLICT (nonce) DO NOTHING

-- session_ended --
SELECT 1 FROM ended_sessions WHERE nonce = %(nonce)s

-- prune_ended_sessions --
DELETE FROM ended_sessions WHERE expires_at < %(before)s

-- record_action --
INSERT INTO operator_actions (id, tenant, subject, subject_id, action, who, at, detail)
VALUES (%(id)s, %(tenant)s, %(subject)s, %(subject_id)s, %(action)s, %(who)s, %(at)s, %(detail)s)

-- actions_on --
SELECT tenant, subject, subject_id, action, who, at, detail FROM operator_actions
WHERE tenant = %(tenant)s AND subject = %(subject)s AND subject_id = %(subject_id)s
ORDER BY at, id
