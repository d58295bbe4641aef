-- Recoup on SQLite, version 3: job groups, and the dunning store's tables (invoices, their
-- attempts and events, per-tenant settings; see recoup/recovery/store.py).
-- Instants are INTEGER microseconds since the Unix epoch, UTC; JSON is TEXT. The state CHECKs
-- list the values of recoup.dunning.invoice's enums (and of `decision` and `final_action`).

-- A job's group (GROUP is an SQL keyword): jobs that belong together, such as an invoice's
-- attempts, listed and cancelled by equality.
ALTER TABLE jobs ADD COLUMN job_group TEXT
    CHECK (job_group IS NULL OR length(job_group) BETWEEN 1 AND 200);

-- Cancelling a group reads its live jobs only, however many of its jobs have finished.
CREATE INDEX jobs_live_group ON jobs (tenant, job_group)
    WHERE job_group IS NOT NULL AND state IN ('scheduled', 'running');
-- Listing a group, newest first, finished jobs included (the listing's order and cursor).
CREATE INDEX jobs_group ON jobs (tenant, job_group, created_at, id) WHERE job_group IS NOT NULL;

CREATE TABLE invoices (
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
    state TEXT NOT NULL
        CHECK (state IN ('retrying', 'awaiting_customer', 'recovered', 'exhausted')),
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

-- list_invoices: one index per filter, each in the listing's (created_at, invoice_id) order.
CREATE INDEX invoices_listing ON invoices (tenant, created_at, invoice_id);
CREATE INDEX invoices_state ON invoices (tenant, state, created_at, invoice_id);
CREATE INDEX invoices_customer ON invoices (tenant, customer_id, created_at, invoice_id);
-- card_history: every invoice on a card (network limits count per card across invoices).
CREATE INDEX invoices_card ON invoices (tenant, card_fingerprint)
    WHERE card_fingerprint IS NOT NULL;

-- Every attempt planned for an invoice; numbers are never reused.
CREATE TABLE invoice_attempts (
    tenant TEXT NOT NULL,
    invoice_id TEXT NOT NULL,
    attempt INTEGER NOT NULL CHECK (attempt >= 1),
    at INTEGER NOT NULL,  -- when it is (or was) due
    state TEXT NOT NULL CHECK (state IN ('scheduled', 'pending', 'awaiting_report', 'succeeded',
                                         'failed', 'cancelled', 'errored')),
    job_id TEXT NOT NULL,
    decline_code TEXT,
    advice_code TEXT,
    reported_at INTEGER,  -- when its final outcome arrived
    PRIMARY KEY (tenant, invoice_id, attempt),
    FOREIGN KEY (tenant, invoice_id) REFERENCES invoices (tenant, invoice_id)
) STRICT;

-- attempts_out_of_sync: an attempt from its job (cancelled attempts whose job is live), and
-- the scheduled attempts, few at any time, whatever the history.
CREATE INDEX invoice_attempts_job ON invoice_attempts (job_id);
CREATE INDEX invoice_attempts_scheduled ON invoice_attempts (at) WHERE state = 'scheduled';

CREATE TABLE invoice_events (
    id TEXT PRIMARY KEY,  -- the Standard Webhooks webhook-id of a sent event
    tenant TEXT NOT NULL,
    invoice_id TEXT NOT NULL,
    seq INTEGER NOT NULL CHECK (seq >= 1),
    type TEXT NOT NULL CHECK (type <> ''),
    at INTEGER NOT NULL,
    data TEXT NOT NULL CHECK (json_valid(data) AND json_type(data) = 'object'),
    dispatched_at INTEGER,  -- when its delivery job was created (NULL: not yet, or a note)
    FOREIGN KEY (tenant, invoice_id) REFERENCES invoices (tenant, invoice_id)
) STRICT;

-- An invoice's events are numbered 1, 2, …: one event per number.
CREATE UNIQUE INDEX invoice_events_seq ON invoice_events (tenant, invoice_id, seq);
-- undispatched_events: only the sendable (`invoice.*`) events still to dispatch.
CREATE INDEX invoice_events_undispatched ON invoice_events (at, tenant, invoice_id, seq)
    WHERE dispatched_at IS NULL AND substr(type, 1, 8) = 'invoice.';

CREATE TABLE dunning_settings (
    tenant TEXT PRIMARY KEY,
    policy_toml TEXT,  -- NULL: the business-days preset
    event_url TEXT,  -- NULL: events stay in the timeline
    charge_url TEXT,  -- the default retry-charge endpoint
    updated_at INTEGER NOT NULL
) STRICT;
