-- Recoup on SQLite, version 8: failure intake from payment providers (see
-- recoup/recovery/intake_store.py): a tenant's intake settings, and every provider event it
-- has processed, so that a redelivered webhook changes nothing and answers as the first did.

-- The Stripe endpoint secret is kept as given (HMAC needs it), like tenants.signing_secret;
-- the API and the CLI never show it once set.
CREATE TABLE intake_settings (
    tenant TEXT PRIMARY KEY,
    stripe_webhook_secret TEXT
        CHECK (stripe_webhook_secret IS NULL OR substr(stripe_webhook_secret, 1, 6) = 'whsec_'),
    default_timezone TEXT NOT NULL CHECK (length(default_timezone) BETWEEN 1 AND 64),
    updated_at INTEGER NOT NULL
) STRICT;

-- One row per event: claimed (no outcome yet) while a delivery acts on it, then finished with
-- the answer every later delivery replays. `occurred_at` is the provider's creation time of
-- the event, `invoice_id` the invoice it is about (none for a customer's event).
CREATE TABLE intake_events (
    tenant TEXT NOT NULL,
    provider TEXT NOT NULL CHECK (provider IN ('stripe')),
    event_id TEXT NOT NULL CHECK (length(event_id) BETWEEN 1 AND 255),
    type TEXT NOT NULL CHECK (length(type) BETWEEN 1 AND 100),
    invoice_id TEXT CHECK (invoice_id IS NULL OR length(invoice_id) BETWEEN 1 AND 100),
    occurred_at INTEGER NOT NULL,
    claimed_at INTEGER NOT NULL,
    finished_at INTEGER,
    outcome TEXT,
    answer TEXT CHECK (answer IS NULL OR json_valid(answer)),
    PRIMARY KEY (tenant, provider, event_id),
    CHECK ((finished_at IS NULL) = (outcome IS NULL) AND (outcome IS NULL) = (answer IS NULL))
) STRICT;

-- invoice_event_since: the events of one invoice (a payment that makes a failure stale).
CREATE INDEX intake_events_invoice ON intake_events (tenant, provider, invoice_id, occurred_at)
    WHERE invoice_id IS NOT NULL;
-- prune_events: the oldest finished events first.
CREATE INDEX intake_events_finished ON intake_events (finished_at)
    WHERE finished_at IS NOT NULL;
