-- Recoup on PostgreSQL, version 12: the customers Recoup writes to, and their renewals (see
-- recoup/recovery/customer_store.py). Independent of 0011 (the messages' tables): it applies
-- with or without it.

-- One row per customer of a tenant: where to write (`email`, checked and written one way by
-- recoup/recovery/contacts.py), in which language, and the access state their invoices in
-- dunning give (recoup/dunning/access.py). A bounce or a complaint suppresses the address
-- (`suppressed_at`); a new address clears it.
CREATE TABLE customers (
    tenant text COLLATE "C" NOT NULL,
    customer_id text COLLATE "C" NOT NULL CHECK (length(customer_id) BETWEEN 1 AND 100),
    email text CHECK (length(email) BETWEEN 3 AND 254),
    name text CHECK (length(name) BETWEEN 1 AND 200),
    locale text CHECK (length(locale) BETWEEN 2 AND 35),
    access text NOT NULL DEFAULT 'active'
        CHECK (access IN ('active', 'grace', 'restricted', 'paused')),
    access_changed_at timestamptz,
    suppressed_at timestamptz,
    suppressed_reason text CHECK (length(suppressed_reason) <= 500),
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, customer_id),
    CONSTRAINT suppressed_with_a_reason CHECK ((suppressed_at IS NULL) = (suppressed_reason IS NULL))
);

-- An upcoming renewal a tenant told Recoup of (POST /v1/dunning/renewals, Stripe's
-- invoice.upcoming): one per customer and instant (`renewal_id` is derived from both), with
-- the card it will be charged on and the reminder job sent when that card will have expired
-- by then.
CREATE TABLE renewals (
    tenant text COLLATE "C" NOT NULL,
    renewal_id text COLLATE "C" NOT NULL CHECK (length(renewal_id) BETWEEN 1 AND 100),
    customer_id text COLLATE "C" NOT NULL CHECK (length(customer_id) BETWEEN 1 AND 100),
    renews_at timestamptz NOT NULL,
    amount bigint NOT NULL CHECK (amount >= 0),  -- minor units
    currency text NOT NULL CHECK (length(currency) = 3),
    timezone text NOT NULL CHECK (length(timezone) BETWEEN 1 AND 64),
    exp_month integer CHECK (exp_month BETWEEN 1 AND 12),
    exp_year integer CHECK (exp_year BETWEEN 1970 AND 9999),
    reminder_job_id text COLLATE "C",
    state text NOT NULL
        CHECK (state IN ('no_reminder', 'reminder_scheduled', 'reminder_cancelled')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, renewal_id),
    CONSTRAINT a_reminder_has_its_job CHECK (state = 'no_reminder' OR reminder_job_id IS NOT NULL)
);

-- A customer's renewals (the reminders a card update cancels).
CREATE INDEX renewals_customer ON renewals (tenant, customer_id, renews_at);

-- Sendable events are every type but the timeline's notes (`note.*`) from now on: a
-- customer's `customer.access_changed` is sent with the invoice events (InvoiceEvent.is_sent).
DROP INDEX invoice_events_undispatched;
CREATE INDEX invoice_events_undispatched ON invoice_events (at, tenant, invoice_id, seq)
    WHERE dispatched_at IS NULL AND substr(type, 1, 5) <> 'note.';
