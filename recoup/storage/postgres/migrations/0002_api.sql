-- The HTTP API's tables: idempotency keys and API tokens (see recoup/idempotency, recoup/api/tokens.py).

CREATE TABLE idempotency_keys (
    tenant        text        NOT NULL REFERENCES tenants (id),
    key           text        NOT NULL,
    fingerprint   text        NOT NULL,
    method        text        NOT NULL,
    path          text        NOT NULL,
    created_at    timestamptz NOT NULL,
    locked_at     timestamptz,          -- set while the first request is in flight
    status        integer,              -- set once it completed
    content_type  text,
    body          bytea,
    -- The primary key decides races between concurrent first requests with one key.
    PRIMARY KEY (tenant, key),
    -- In flight (locked, no response) or completed (a response, unlocked): never both, never neither.
    CONSTRAINT locked_xor_completed CHECK ((locked_at IS NULL) = (status IS NOT NULL)),
    CONSTRAINT completed_has_body CHECK (status IS NULL OR (body IS NOT NULL AND content_type IS NOT NULL))
);

CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

CREATE TABLE api_tokens (
    id          text        PRIMARY KEY,
    tenant      text        NOT NULL REFERENCES tenants (id),
    token_hash  text        NOT NULL UNIQUE,  -- sha256 hex of the secret; the secret is never stored
    prefix      text        NOT NULL,         -- the first characters, to tell tokens apart
    label       text,
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz,
    CONSTRAINT revoked_after_created CHECK (revoked_at IS NULL OR revoked_at >= created_at)
);

CREATE INDEX api_tokens_tenant ON api_tokens (tenant, created_at);
