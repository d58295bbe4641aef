-- Recoup on PostgreSQL, version 5: what the recovery report reads and the policy experiments
-- (see recoup/recovery/store.py): tagged merchant ids, the invoices of a window by their
-- failure, events counted by type, and a tenant's second policy with its share.

-- A merchant id an operator has looked at: the review queue leaves it out until its data
-- contradicts the tag. One tag per merchant id; the values are recoup.analytics.recovery's
-- TAG_KINDS.
CREATE TABLE merchant_tags (
    tenant text COLLATE "C" NOT NULL,
    merchant_id text COLLATE "C" NOT NULL CHECK (length(merchant_id) BETWEEN 1 AND 100),
    tag text NOT NULL CHECK (tag IN ('seasonal', 'new', 'other')),
    note text NOT NULL CHECK (length(note) <= 1000),
    tagged_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, merchant_id)
);

-- report_invoices: a tenant's invoices by the instant of the failure that opened them.
CREATE INDEX invoices_failed ON invoices (tenant, failed_at);
-- count_events: a tenant's events of one type in a window (double charges), from the index
-- alone.
CREATE INDEX invoice_events_type ON invoice_events (tenant, type, at);

-- The experiment: all three columns or none. Nullable columns without defaults: adding them
-- rewrites nothing.
ALTER TABLE dunning_settings
    ADD COLUMN experiment_name text CHECK (length(experiment_name) BETWEEN 1 AND 100),
    ADD COLUMN experiment_policy_toml text,
    ADD COLUMN experiment_share double precision
        CHECK (experiment_share > 0 AND experiment_share < 1),
    ADD CONSTRAINT experiment_whole CHECK (
        (experiment_name IS NULL) = (experiment_policy_toml IS NULL)
        AND (experiment_name IS NULL) = (experiment_share IS NULL)
    );
