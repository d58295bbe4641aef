-- Recoup on SQLite, version 10: dunning that stops without a payment, and charging through
-- the provider inside Recoup (see recoup/recovery/hosted_store.py).
--
-- SQLite cannot change a CHECK in place: `invoices` and `intake_settings` are made again with
-- the new CHECKs and their rows copied (the documented twelve-step way; the migration runs
-- with foreign keys off and checks them before it commits, see SqliteStore._apply).

-- invoices.state gains 'cancelled': dunning stopped without a payment.
CREATE TABLE invoices_next (
    tenant TEXT NOT NULL,
    invoice_id TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    amount INTEGER NOT NULL CHECK (amount > 0),  -- minor units
    currency TEXT NOT NULL,
    failed_at INTEGER NOT NULL,  -- the failure that opened dunning
    timezone TEXT NOT NULL,
    country TEXT,
    decline_code TEXT,
    advice_code TEXT,
    card_fingerprint TEXT,
    card_network TEXT,
    gateway TEXT,
    merchant_id TEXT,
    charge_url TEXT NOT NULL,
    policy TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('retrying', 'awaiting_customer', 'recovered',
                                         'exhausted', 'cancelled')),
    decision TEXT NOT NULL CHECK (decision IN ('retry', 'no_retry', 'await_customer')),
    reason TEXT NOT NULL,
    final_action TEXT NOT NULL
        CHECK (final_action IN ('pause_access', 'cancel', 'mark_uncollectible', 'leave_past_due')),
    recovered_by TEXT,
    version INTEGER NOT NULL CHECK (version >= 0),  -- bumped by every transition
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, invoice_id),
    CONSTRAINT recovered_by_only_when_recovered CHECK (recovered_by IS NULL OR state = 'recovered')
) STRICT;

INSERT INTO invoices_next (
    tenant, invoice_id, customer_id, amount, currency, failed_at, timezone, country,
    decline_code, advice_code, card_fingerprint, card_network, gateway, merchant_id,
    charge_url, policy, state, decision, reason, final_action, recovered_by, version,
    created_at, updated_at
)
SELECT
    tenant, invoice_id, customer_id, amount, currency, failed_at, timezone, country,
    decline_code, advice_code, card_fingerprint, card_network, gateway, merchant_id,
    charge_url, policy, state, decision, reason, final_action, recovered_by, version,
    created_at, updated_at
FROM invoices;

DROP TABLE invoices;
ALTER TABLE invoices_next RENAME TO invoices;

CREATE INDEX invoices_listing ON invoices (tenant, created_at, invoice_id);
CREATE INDEX invoices_state ON invoices (tenant, state, created_at, invoice_id);
CREATE INDEX invoices_customer ON invoices (tenant, customer_id, created_at, invoice_id);
CREATE INDEX invoices_card ON invoices (tenant, card_fingerprint)
    WHERE card_fingerprint IS NOT NULL;
CREATE INDEX invoices_failed ON invoices (tenant, failed_at);

-- The Stripe endpoint secret is stored sealed (recoup/sealed.py) from now on: its CHECK takes
-- a sealed value as well as one stored before (sealed by `recoup secrets rotate`).
CREATE TABLE intake_settings_next (
    tenant TEXT PRIMARY KEY,
    stripe_webhook_secret TEXT
        CHECK (stripe_webhook_secret IS NULL OR substr(stripe_webhook_secret, 1, 6) = 'whsec_'
               OR substr(stripe_webhook_secret, 1, 10) = 'sealed:v1:'),
    default_timezone TEXT NOT NULL CHECK (length(default_timezone) BETWEEN 1 AND 64),
    updated_at INTEGER NOT NULL
) STRICT;

INSERT INTO intake_settings_next (tenant, stripe_webhook_secret, default_timezone, updated_at)
SELECT tenant, stripe_webhook_secret, default_timezone, updated_at FROM intake_settings;

DROP TABLE intake_settings;
ALTER TABLE intake_settings_next RENAME TO intake_settings;

-- A tenant whose attempts Recoup charges itself, through the provider, with the tenant's key
-- (sealed). No row: attempts go to the charge endpoint (`charge_url`), as before.
CREATE TABLE hosted_charging (
    tenant TEXT PRIMARY KEY,
    provider TEXT NOT NULL CHECK (provider IN ('stripe')),
    api_key TEXT NOT NULL CHECK (substr(api_key, 1, 10) = 'sealed:v1:'),
    updated_at INTEGER NOT NULL
) STRICT;

-- The ledger of hosted charges: one row per provider key (`charge:{invoice}:{n}`), written
-- `pending` before the provider is called, so that a crash or a timeout leaves a row that the
-- next try reconciles (looks up at the provider) before it pays again.
CREATE TABLE hosted_charges (
    tenant TEXT NOT NULL,
    charge_key TEXT NOT NULL CHECK (length(charge_key) BETWEEN 1 AND 255),
    invoice_id TEXT NOT NULL,
    attempt INTEGER NOT NULL CHECK (attempt >= 1),
    state TEXT NOT NULL CHECK (state IN ('pending', 'succeeded', 'declined', 'paid_elsewhere',
                                         'closed', 'action_required')),
    provider_charge_id TEXT,
    decline_code TEXT,
    advice_code TEXT,
    request_id TEXT,  -- the provider's id of the last request about it, for the run log
    calls INTEGER NOT NULL DEFAULT 0 CHECK (calls >= 0),  -- pay requests sent under this key
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, charge_key)
) STRICT;

CREATE INDEX hosted_charges_invoice ON hosted_charges (tenant, invoice_id, attempt);
