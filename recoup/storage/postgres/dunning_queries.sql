-- Named queries of the dunning store on PostgreSQL (see migrations/0003_dunning.sql and
-- recoup/storage/dunning_tables.py). Every connection runs with search_path = the store's
-- schema and TimeZone = UTC.

-- insert_invoice --
-- The primary key decides concurrent creations: one insert wins, the others wait for it to
-- commit and then insert nothing.
INSERT INTO invoices ({invoice_columns})
VALUES (%(tenant)s, %(invoice_id)s, %(customer_id)s, %(amount)s, %(currency)s, %(failed_at)s,
        %(timezone)s, %(country)s, %(decline_code)s, %(advice_code)s, %(card_fingerprint)s,
        %(card_network)s, %(gateway)s, %(merchant_id)s, %(charge_url)s, %(policy)s, %(state)s,
        %(decision)s, %(reason)s, %(final_action)s, %(recovered_by)s, %(version)s,
        %(created_at)s, %(updated_at)s)
ON CONFLICT (tenant, invoice_id) DO NOTHING
RETURNING 1

-- lock_invoice --
-- Held until the transaction ends: concurrent changes of one invoice queue here.
SELECT version FROM invoices
WHERE tenant = %(tenant)s AND invoice_id = %(invoice_id)s
FOR UPDATE

-- update_invoice --
-- Compare-and-set on the version read under the lock; created_at, the listing's order, stays.
UPDATE invoices
SET customer_id = %(customer_id)s, amount = %(amount)s, currency = %(currency)s,
    failed_at = %(failed_at)s, timezone = %(timezone)s, country = %(country)s,
    decline_code = %(decline_code)s, advice_code = %(advice_code)s,
    card_fingerprint = %(card_fingerprint)s, card_network = %(card_network)s,
    gateway = %(gateway)s, merchant_id = %(merchant_id)s, charge_url = %(charge_url)s,
    policy = %(policy)s, state = %(state)s, decision = %(decision)s, reason = %(reason)s,
    final_action = %(final_action)s, recovered_by = %(recovered_by)s, version = %(version)s,
    updated_at = %(updated_at)s
WHERE tenant = %(tenant)s AND invoice_id = %(invoice_id)s AND version = %(expected_version)s

-- upsert_attempt --
INSERT INTO invoice_attempts (tenant, invoice_id, {attempt_columns})
VALUES (%(tenant)s, %(invoice_id)s, %(attempt)s, %(at)s, %(state)s, %(job_id)s,
        %(decline_code)s, %(advice_code)s, %(reported_at)s, %(timing_arm)s, %(timing_slot)s,
        %(timing_static_slot)s, %(timing_propensity)s, %(timing_explanation)s,
        %(timing_figures)s::jsonb)
ON CONFLICT (tenant, invoice_id, attempt) DO UPDATE
SET at = excluded.at, state = excluded.state, job_id = excluded.job_id,
    decline_code = excluded.decline_code, advice_code = excluded.advice_code,
    reported_at = excluded.reported_at, timing_arm = excluded.timing_arm,
    timing_slot = excluded.timing_slot, timing_static_slot = excluded.timing_static_slot,
    timing_propensity = excluded.timing_propensity,
    timing_explanation = excluded.timing_explanation, timing_figures = excluded.timing_figures

-- _with_attempts --
-- The invoices of `page` (a CTE in their listing order), each with its attempts: one
-- statement, so one snapshot, for an invoice and its attempts.
SELECT {p_invoice_columns}, {a_attempt_columns}
FROM page p
LEFT JOIN invoice_attempts a ON a.tenant = p.tenant AND a.invoice_id = p.invoice_id
ORDER BY p.created_at, p.invoice_id, a.attempt

-- get_invoice --
WITH page AS (
    SELECT {invoice_columns} FROM invoices
    WHERE tenant = %(tenant)s AND invoice_id = %(invoice_id)s
)
{_with_attempts}

-- _after_cursor --
-- Oldest first; the cursor is the (created_at, invoice_id) of the last invoice of the
-- previous page.
  AND (%(cursor_created)s::timestamptz IS NULL
       OR (created_at, invoice_id) > (%(cursor_created)s::timestamptz, %(cursor_id)s::text))
ORDER BY created_at, invoice_id
LIMIT %(limit)s

-- list_invoices --
-- Through invoices_listing.
WITH page AS (
    SELECT {invoice_columns} FROM invoices
    WHERE tenant = %(tenant)s
    {_after_cursor}
)
{_with_attempts}

-- list_invoices_in_state --
-- Through invoices_state.
WITH page AS (
    SELECT {invoice_columns} FROM invoices
    WHERE tenant = %(tenant)s AND state = %(state)s::text
    {_after_cursor}
)
{_with_attempts}

-- list_invoices_of_customer --
-- Through invoices_customer (a customer has few invoices: the state, if any, is a filter).
WITH page AS (
    SELECT {invoice_columns} FROM invoices
    WHERE tenant = %(tenant)s AND customer_id = %(customer_id)s::text
      AND (%(state)s::text IS NULL OR state = %(state)s::text)
    {_after_cursor}
)
{_with_attempts}

-- event_numbers --
SELECT seq, id FROM invoice_events
WHERE tenant = %(tenant)s AND invoice_id = %(invoice_id)s AND seq >= %(from_seq)s

-- insert_event --
-- An id already stored is skipped (a replayed transition); a number taken under another id
-- was refused before this (SqlDunningTables._write_events).
INSERT INTO invoice_events ({event_columns})
VALUES (%(id)s, %(tenant)s, %(invoice_id)s, %(seq)s, %(type)s, %(at)s, %(data)s::jsonb)
ON CONFLICT (id) DO NOTHING

-- invoice_events --
SELECT {event_columns} FROM invoice_events
WHERE tenant = %(tenant)s AND invoice_id = %(invoice_id)s
ORDER BY seq

-- event_count --
SELECT count(*) FROM invoice_events WHERE tenant = %(tenant)s AND invoice_id = %(invoice_id)s

-- undispatched_events --
-- Walks invoice_events_undispatched: the same two conditions as its WHERE.
SELECT {event_columns} FROM invoice_events
WHERE dispatched_at IS NULL AND substr(type, 1, 5) <> 'note.'
ORDER BY at, tenant, invoice_id, seq
LIMIT %(limit)s

-- mark_events_dispatched --
UPDATE invoice_events SET dispatched_at = %(now)s
WHERE id = ANY(%(ids)s::text[]) AND dispatched_at IS NULL

-- attempts_out_of_sync --
-- Scheduled attempts with no job of their id (through invoice_attempts_scheduled: few at any
-- time), then cancelled attempts whose job is scheduled and was never claimed (through
-- invoice_attempts_job; one already asked is left to finish, so its answer is heard), oldest
-- first.
SELECT * FROM (
    SELECT a.tenant, a.invoice_id, {a_attempt_columns}
    FROM invoice_attempts a
    WHERE a.state = 'scheduled'
      AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = a.job_id AND j.tenant = a.tenant)
    UNION ALL
    SELECT a.tenant, a.invoice_id, {a_attempt_columns}
    FROM jobs j
    JOIN invoice_attempts a ON a.job_id = j.id AND a.tenant = j.tenant
    WHERE j.state = 'scheduled' AND j.attempts = 0 AND a.state = 'cancelled'
) AS found
ORDER BY at, tenant, invoice_id, attempt
LIMIT %(limit)s

-- attempts_ended_unanswered --
-- Open attempts (scheduled, or pending an ambiguous answer) whose job ended without an answer:
-- cancelled or failed for good (by hand, `recoup jobs cancel`, or its retries spent), or, for a
-- pending one, gone (a scheduled attempt without its job is `attempts_out_of_sync`'s). Through
-- invoice_attempts_job from the few open attempts; oldest first. NULL job state: gone.
SELECT a.tenant, a.invoice_id, {a_attempt_columns}, j.state
FROM invoice_attempts a
LEFT JOIN jobs j ON j.id = a.job_id AND j.tenant = a.tenant
WHERE (a.state IN ('scheduled', 'pending') AND j.state IN ('cancelled', 'failed'))
   OR (a.state = 'pending' AND j.id IS NULL)
ORDER BY a.at, a.tenant, a.invoice_id, a.attempt
LIMIT %(limit)s

-- card_history --
-- Each invoice's failure on the card (not a reattempt), then every attempt not cancelled.
SELECT invoice_id, failed_at AS at, merchant_id, amount, false AS reattempt
FROM invoices
WHERE tenant = %(tenant)s AND card_fingerprint = %(card)s AND failed_at >= %(since)s
UNION ALL
SELECT i.invoice_id, a.at, i.merchant_id, i.amount, true
FROM invoices i
JOIN invoice_attempts a ON a.tenant = i.tenant AND a.invoice_id = i.invoice_id
WHERE i.tenant = %(tenant)s AND i.card_fingerprint = %(card)s AND a.at >= %(since)s
  AND a.state <> 'cancelled'
ORDER BY at, invoice_id

-- get_settings --
SELECT {settings_columns} FROM dunning_settings WHERE tenant = %(tenant)s

-- put_settings --
INSERT INTO dunning_settings ({settings_columns})
VALUES (%(tenant)s, %(policy_toml)s, %(event_url)s, %(charge_url)s, %(updated_at)s,
        %(experiment_name)s, %(experiment_policy_toml)s, %(experiment_share)s)
ON CONFLICT (tenant) DO UPDATE
SET policy_toml = excluded.policy_toml, event_url = excluded.event_url,
    charge_url = excluded.charge_url, updated_at = excluded.updated_at,
    experiment_name = excluded.experiment_name,
    experiment_policy_toml = excluded.experiment_policy_toml,
    experiment_share = excluded.experiment_share
RETURNING {settings_columns}

-- _report_window --
-- The invoices of the report: through invoices_failed (migration 0005).
WHERE i.tenant = %(tenant)s AND i.failed_at >= %(since)s AND i.failed_at < %(until)s

-- report_invoices --
-- Then report_attempts, in the same REPEATABLE READ transaction (one snapshot).
SELECT {i_invoice_columns} FROM invoices i
{_report_window}
ORDER BY i.failed_at, i.invoice_id

-- report_attempts --
-- Unordered: an ORDER BY would tempt the planner into walking every invoice of the tenant in
-- key order instead of the window through invoices_failed (the store orders each invoice's).
SELECT a.invoice_id, {a_attempt_columns}
FROM invoices i
JOIN invoice_attempts a ON a.tenant = i.tenant AND a.invoice_id = i.invoice_id
{_report_window}

-- dunning_amounts --
-- The report's invoices (failed in the window) counted and summed by state and currency, as
-- dunning_figures_invoices counts every tenant's for /metrics.
SELECT i.tenant, i.state, i.currency, count(*), sum(i.amount) FROM invoices i
{_report_window}
GROUP BY i.tenant, i.state, i.currency

-- count_events --
-- From invoice_events_type alone.
SELECT count(*) FROM invoice_events
WHERE tenant = %(tenant)s AND type = %(type)s AND at >= %(since)s AND at < %(until)s

-- put_merchant_tag --
INSERT INTO merchant_tags (tenant, {tag_columns})
VALUES (%(tenant)s, %(merchant_id)s, %(tag)s, %(note)s, %(tagged_at)s)
ON CONFLICT (tenant, merchant_id) DO UPDATE
SET tag = excluded.tag, note = excluded.note, tagged_at = excluded.tagged_at
RETURNING {tag_columns}

-- delete_merchant_tag --
DELETE FROM merchant_tags WHERE tenant = %(tenant)s AND merchant_id = %(merchant_id)s

-- merchant_tags --
SELECT {tag_columns} FROM merchant_tags WHERE tenant = %(tenant)s ORDER BY merchant_id

-- dunning_figures_invoices --
-- /metrics: invoices and their amounts by tenant, state and currency (every row, grouped).
SELECT tenant, state, currency, count(*), sum(amount) FROM invoices
GROUP BY tenant, state, currency

-- dunning_figures_attempts --
SELECT tenant, state, count(*) FROM invoice_attempts GROUP BY tenant, state

-- dunning_figures_double_charges --
SELECT tenant, count(*) FROM invoice_events WHERE type = 'invoice.double_charged'
GROUP BY tenant

-- learner_attempts --
-- A tenant's answered attempts (succeeded or failed) reported at or after :since, with what the
-- learner needs of their invoice (`recovery.learning`), through invoice_attempts_reported
-- (migration 0016), oldest answer first.
SELECT a.invoice_id, {a_attempt_columns}, i.timezone, i.country, i.decline_code,
       i.advice_code, i.card_network
FROM invoice_attempts a
JOIN invoices i ON i.tenant = a.tenant AND i.invoice_id = a.invoice_id
WHERE a.tenant = %(tenant)s AND a.reported_at >= %(since)s
  AND a.state IN ('succeeded', 'failed')
ORDER BY a.reported_at, a.invoice_id, a.attempt
LIMIT %(limit)s
