-- The receiver's tables and queries on SQLite (see recoup/receiver/database.py).
-- Instants are integer microseconds since the Unix epoch, UTC: they compare exactly, which the
-- compare-and-set on `locked_at` needs.

-- schema --
CREATE TABLE IF NOT EXISTS receiver_idempotency_keys (
    key           TEXT    PRIMARY KEY,  -- decides the race between concurrent first requests
    fingerprint   TEXT    NOT NULL,     -- sha256 of the canonical body
    created_at    INTEGER NOT NULL,
    locked_at     INTEGER,              -- set while the first request is in flight
    status        INTEGER,              -- set once it completed
    content_type  TEXT,
    body          BLOB,
    CONSTRAINT locked_xor_completed CHECK ((locked_at IS NULL) = (status IS NOT NULL)),
    CONSTRAINT completed_has_body CHECK (status IS NULL OR (body IS NOT NULL AND content_type IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS receiver_idempotency_keys_created_at
    ON receiver_idempotency_keys (created_at);

CREATE TABLE IF NOT EXISTS receiver_charges (
    charge_key          TEXT    PRIMARY KEY,  -- the provider's idempotency key
    invoice_id          TEXT    NOT NULL,
    attempt             INTEGER NOT NULL CHECK (attempt >= 1),
    state               TEXT    NOT NULL
        CHECK (state IN ('succeeded', 'failed_terminal', 'failed_retryable', 'pending')),
    amount              INTEGER NOT NULL CHECK (amount > 0),
    currency            TEXT    NOT NULL,
    provider_charge_id  TEXT,
    decline_code        TEXT,
    advice_code         TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    CONSTRAINT succeeded_has_charge CHECK (state <> 'succeeded' OR provider_charge_id IS NOT NULL),
    CONSTRAINT updated_after_created CHECK (updated_at >= created_at)
);
CREATE INDEX IF NOT EXISTS receiver_charges_invoice ON receiver_charges (invoice_id, attempt);

-- claim_key --
INSERT INTO receiver_idempotency_keys (key, fingerprint, created_at, locked_at)
VALUES (:key, :fingerprint, :now, :now)
ON CONFLICT (key) DO NOTHING

-- get_key --
SELECT fingerprint, locked_at, status, content_type, body
FROM receiver_idempotency_keys WHERE key = :key

-- take_over_key --
-- Compare-and-set on the stale lock: of two takers, one changes the row.
UPDATE receiver_idempotency_keys SET locked_at = :now
WHERE key = :key AND status IS NULL AND locked_at = :locked_at

-- complete_key --
-- Only by the lock's holder: a request whose key was taken over must not overwrite the taker's.
UPDATE receiver_idempotency_keys
SET status = :status, content_type = :content_type, body = :body, locked_at = NULL
WHERE key = :key AND status IS NULL AND locked_at = :locked_at

-- release_key --
DELETE FROM receiver_idempotency_keys
WHERE key = :key AND status IS NULL AND locked_at = :locked_at

-- prune_keys --
DELETE FROM receiver_idempotency_keys WHERE created_at < :before

-- get_charge --
SELECT charge_key, invoice_id, attempt, state, amount, currency, provider_charge_id,
       decline_code, advice_code, created_at, updated_at
FROM receiver_charges WHERE charge_key = :charge_key

-- invoice_charges --
SELECT charge_key, invoice_id, attempt, state, amount, currency, provider_charge_id,
       decline_code, advice_code, created_at, updated_at
FROM receiver_charges WHERE invoice_id = :invoice_id ORDER BY attempt, charge_key

-- record_charge --
INSERT INTO receiver_charges (charge_key, invoice_id, attempt, state, amount, currency,
                              provider_charge_id, decline_code, advice_code, created_at, updated_at)
VALUES (:charge_key, :invoice_id, :attempt, :state, :amount, :currency,
        :provider_charge_id, :decline_code, :advice_code, :now, :now)
ON CONFLICT (charge_key) DO UPDATE SET
    state = excluded.state,
    provider_charge_id = excluded.provider_charge_id,
    decline_code = excluded.decline_code,
    advice_code = excluded.advice_code,
    updated_at = max(receiver_charges.created_at, excluded.updated_at)
