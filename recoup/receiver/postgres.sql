-- The receiver's tables and queries on PostgreSQL (see recoup/receiver/database.py). They live
-- in the connection's search_path, so the user's own schema choice applies.

-- schema --
-- Serialises concurrent start-ups: CREATE TABLE IF NOT EXISTS alone can fail on a race.
SELECT pg_advisory_xact_lock(hashtextextended('recoup.receiver schema', 0));

CREATE TABLE IF NOT EXISTS receiver_idempotency_keys (
    key           text        PRIMARY KEY,  -- decides the race between concurrent first requests
    fingerprint   text        NOT NULL,     -- sha256 of the canonical body
    created_at    timestamptz NOT NULL,
    locked_at     timestamptz,              -- set while the first request is in flight
    status        integer,                  -- set once it completed
    content_type  text,
    body          bytea,
    CONSTRAINT locked_xor_completed CHECK ((locked_at IS NULL) = (status IS NOT NULL)),
    CONSTRAINT completed_has_body CHECK (status IS NULL OR (body IS NOT NULL AND content_type IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS receiver_idempotency_keys_created_at
    ON receiver_idempotency_keys (created_at);

CREATE TABLE IF NOT EXISTS receiver_charges (
    charge_key          text        PRIMARY KEY,  -- the provider's idempotency key
    invoice_id          text        NOT NULL,
    attempt             integer     NOT NULL CHECK (attempt >= 1),
    state               text        NOT NULL
        CHECK (state IN ('succeeded', 'failed_terminal', 'failed_retryable', 'pending')),
    amount              bigint      NOT NULL CHECK (amount > 0),
    currency            text        NOT NULL,
    provider_charge_id  text,
    decline_code        text,
    advice_code         text,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    CONSTRAINT succeeded_has_charge CHECK (state <> 'succeeded' OR provider_charge_id IS NOT NULL),
    CONSTRAINT updated_after_created CHECK (updated_at >= created_at)
);
CREATE INDEX IF NOT EXISTS receiver_charges_invoice ON receiver_charges (invoice_id, attempt);

-- claim_key --
-- The primary key decides a race between concurrent first requests: one insert wins, the
-- others wait for it to commit and then insert nothing.
INSERT INTO receiver_idempotency_keys (key, fingerprint, created_at, locked_at)
VALUES (%(key)s, %(fingerprint)s, %(now)s, %(now)s)
ON CONFLICT (key) DO NOTHING

-- get_key --
SELECT fingerprint, locked_at, status, content_type, body
FROM receiver_idempotency_keys WHERE key = %(key)s

-- take_over_key --
-- Compare-and-set on the stale lock: of two takers, one changes the row.
UPDATE receiver_idempotency_keys SET locked_at = %(now)s
WHERE key = %(key)s AND status IS NULL AND locked_at = %(locked_at)s

-- complete_key --
-- Only by the lock's holder: a request whose key was taken over must not overwrite the taker's.
UPDATE receiver_idempotency_keys
SET status = %(status)s, content_type = %(content_type)s, body = %(body)s, locked_at = NULL
WHERE key = %(key)s AND status IS NULL AND locked_at = %(locked_at)s

-- release_key --
DELETE FROM receiver_idempotency_keys
WHERE key = %(key)s AND status IS NULL AND locked_at = %(locked_at)s

-- prune_keys --
DELETE FROM receiver_idempotency_keys WHERE created_at < %(before)s

-- lock_invoice --
-- The receiver's own lock on the invoice, held until the transaction ends: its ledger logic is
-- serialised per invoice even if the user's lock query forgot FOR UPDATE. A hash collision
-- only makes two invoices wait for each other.
SELECT pg_advisory_xact_lock(hashtextextended('recoup.receiver invoice ' || %(invoice_id)s, 0))

-- get_charge --
SELECT charge_key, invoice_id, attempt, state, amount, currency, provider_charge_id,
       decline_code, advice_code, created_at, updated_at
FROM receiver_charges WHERE charge_key = %(charge_key)s

-- invoice_charges --
SELECT charge_key, invoice_id, attempt, state, amount, currency, provider_charge_id,
       decline_code, advice_code, created_at, updated_at
FROM receiver_charges WHERE invoice_id = %(invoice_id)s ORDER BY attempt, charge_key

-- record_charge --
INSERT INTO receiver_charges (charge_key, invoice_id, attempt, state, amount, currency,
                              provider_charge_id, decline_code, advice_code, created_at, updated_at)
VALUES (%(charge_key)s, %(invoice_id)s, %(attempt)s, %(state)s, %(amount)s, %(currency)s,
        %(provider_charge_id)s, %(decline_code)s, %(advice_code)s, %(now)s, %(now)s)
ON CONFLICT (charge_key) DO UPDATE SET
    state = excluded.state,
    provider_charge_id = excluded.provider_charge_id,
    decline_code = excluded.decline_code,
    advice_code = excluded.advice_code,
    updated_at = greatest(receiver_charges.created_at, excluded.updated_at)
