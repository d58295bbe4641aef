-- The HTTP API's tables: idempotency keys and API tokens (see recoup/idempotency, recoup/api/tokens.py).
-- Instants are integer microseconds since the Unix epoch, UTC.

CREATE TABLE idempotency_keys (
    tenant        TEXT    NOT NULL REFERENCES tenants (id),
    key           TEXT    NOT NULL,
    fingerprint   TEXT    NOT NULL,
    method        TEXT    NOT NULL,
    path          TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    locked_at     INTEGER,            -- set while the first request is in flight
    status        INTEGER,            -- set once it completed
    content_type  TEXT,
    body          BLOB,
    -- The primary key decides races between concurrent first requests with one key.
    PRIMARY KEY (tenant, key),
    -- In flight (locked, no response) or completed (a response, unlocked): never both, never neither.
    CONSTRAINT locked_xor_completed CHECK ((locked_at IS NULL) = (status IS NOT NULL)),
    CONSTRAINT completed_has_body CHECK (status IS NULL OR (body IS NOT NULL AND content_type IS NOT NULL))
) STRICT;

CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

CREATE TABLE api_tokens (
    id          TEXT    PRIMARY KEY,
    tenant      TEXT    NOT NULL REFERENCES tenants (id),
    token_hash  TEXT    NOT NULL UNIQUE,  -- sha256 hex of the secret; the secret is never stored
    prefix      TEXT    NOT NULL,         -- the first characters, to tell tokens apart
    label       TEXT,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER,
    CONSTRAINT revoked_after_created CHECK (revoked_at IS NULL OR revoked_at >= created_at)
) STRICT;

CREATE INDEX api_tokens_tenant ON api_tokens (tenant, created_at);
