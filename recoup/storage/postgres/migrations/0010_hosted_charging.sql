-- Recoup on PostgreSQL, version 10: dunning that stops without a payment, and charging
-- through the provider inside Recoup (see recoup/recovery/hosted_store.py).

-- invoices.state gains 'cancelled': dunning stopped without a payment. (The column's CHECK
-- is named by PostgreSQL's rule: table_column_check.)
ALTER TABLE invoices DROP CONSTRAINT invoices_state_check;
ALTER TABLE invoices ADD CONSTRAINT invoices_state_check
    CHECK (state IN ('retrying', 'awaiting_customer', 'recovered', 'exhausted', 'cancelled'));

-- The Stripe endpoint secret is stored sealed (recoup/sealed.py) from now on: its CHECK takes
-- a sealed value as well as one stored before (sealed by `recoup secrets rotate`).
ALTER TABLE intake_settings DROP CONSTRAINT intake_settings_stripe_webhook_secret_check;
ALTER TABLE intake_settings ADD CONSTRAINT intake_settings_stripe_webhook_secret_check
    CHECK (left(stripe_webhook_secret, 6) = 'whsec_'
           OR left(stripe_webhook_secret, 10) = 'sealed:v1:');

-- A tenant whose attempts Recoup charges itself, through the provider, with the tenant's key
-- (sealed). No row: attempts go to the charge endpoint (`charge_url`), as before.
CREATE TABLE hosted_charging (
    tenant text COLLATE "C" PRIMARY KEY,
    provider text NOT NULL CHECK (provider IN ('stripe')),
    api_key text NOT NULL CHECK (left(api_key, 10) = 'sealed:v1:'),
    updated_at timestamptz NOT NULL
);

-- The ledger of hosted charges: one row per provider key (`charge:{invoice}:{n}`), written
-- `pending` before the provider is called, so that a crash or a timeout leaves a row that the
-- next try reconciles (looks up at the provider) before it pays again.
CREATE TABLE hosted_charges (
    tenant text COLLATE "C" NOT NULL,
    charge_key text COLLATE "C" NOT NULL CHECK (length(charge_key) BETWEEN 1 AND 255),
    invoice_id text COLLATE "C" NOT NULL,
    attempt integer NOT NULL CHECK (attempt >= 1),
    state text NOT NULL CHECK (state IN ('pending', 'succeeded', 'declined', 'paid_elsewhere',
                                         'closed', 'action_required')),
    provider_charge_id text,
    decline_code text,
    advice_code text,
    request_id text,  -- the provider's id of the last request about it, for the run log
    calls integer NOT NULL DEFAULT 0 CHECK (calls >= 0),  -- pay requests sent under this key
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, charge_key)
);

CREATE INDEX hosted_charges_invoice ON hosted_charges (tenant, invoice_id, attempt);
