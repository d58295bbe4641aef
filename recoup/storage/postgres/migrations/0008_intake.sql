-- Recoup on PostgreSQL, version 8: failure intake from payment providers (see
-- recoup/recovery/intake_store.py): a tenant's intake settings, and every provider event it
-- has processed, so that a redelivered webhook changes nothing and answers as the first did.

-- The Stripe endpoint secret is kept as given (HMAC needs it), like tenants.signing_secret;
-- the API and the CLI never show it once set.
CREATE TABLE intake_settings (
    tenant text COLLATE "C" PRIMARY KEY,
    stripe_webhook_secret text CHECK (left(stripe_webhook_secret, 6) = 'whsec_'),
    default_timezone text NOT NULL CHECK (length(default_timezone) BETWEEN 1 AND 64),
    updated_at timestamptz NOT NULL
);

-- One row per event: claimed (no outcome yet) while a delivery acts on it, then finished with
-- the answer every later delivery replays. `occurred_at` is the provider's creation time of
-- the event, `invoice_id` the invoice it is about (none for a customer's event).
CREATE TABLE intake_events (
    tenant text COLLATE "C" NOT NULL,
    provider text NOT NULL CHECK (provider IN ('stripe')),
    event_id text COLLATE "C" NOT NULL CHECK (length(event_id) BETWEEN 1 AND 255),
    type text NOT NULL CHECK (length(type) BETWEEN 1 AND 100),
    invoice_id text COLLATE "C" CHECK (length(invoice_id) BETWEEN 1 AND 100),
    occurred_at timestamptz NOT NULL,
    claimed_at timestamptz NOT NULL,
    finished_at timestamptz,
    outcome text,
    answer jsonb,
    PRIMARY KEY (tenant, provider, event_id),
    CHECK ((finished_at IS NULL) = (outcome IS NULL) AND (outcome IS NULL) = (answer IS NULL))
);

-- invoice_event_since: the events of one invoice (a payment that makes a failure stale).
CREATE INDEX intake_events_invoice ON intake_events (tenant, provider, invoice_id, occurred_at)
    WHERE invoice_id IS NOT NULL;
-- prune_events: the oldest finished events first.
CREATE INDEX intake_events_finished ON intake_events (finished_at)
    WHERE finished_at IS NOT NULL;
