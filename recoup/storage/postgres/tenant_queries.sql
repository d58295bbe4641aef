-- Named queries of a tenant's life after creation on PostgreSQL (migration 0007): disabling and
-- enabling, rotating the signing secret, deleting with every row. Every block runs inside one
-- write transaction (`SqlTenantTables`).

-- disable_tenant --
UPDATE tenants SET disabled_at = coalesce(disabled_at, %(now)s) WHERE id = %(id)s

-- enable_tenant --
UPDATE tenants SET disabled_at = NULL WHERE id = %(id)s

-- hold_jobs --
-- Out of jobs_due: no claim of another tenant steps over them while this one is disabled.
UPDATE jobs SET held = true WHERE tenant = %(tenant)s AND state = 'scheduled' AND NOT held

-- release_held_jobs --
UPDATE jobs SET held = false WHERE tenant = %(tenant)s AND state = 'scheduled' AND held

-- replace_signing_secret --
-- previous_until NULL: the current secret stops signing at once.
UPDATE tenants
SET previous_signing_secret =
        CASE WHEN %(previous_until)s::timestamptz IS NULL THEN NULL ELSE signing_secret END,
    previous_secret_until = %(previous_until)s,
    signing_secret = %(secret)s
WHERE id = %(id)s

-- tenant_state --
-- The row lock orders a deletion after a concurrent enable (or before it).
SELECT disabled_at FROM tenants WHERE id = %(id)s FOR UPDATE

-- running_jobs_of_tenant --
SELECT count(*) FROM jobs WHERE tenant = %(tenant)s AND state = 'running'

-- delete_invoice_attempts --
-- The delete_* blocks run in this order (children before the rows they reference; foreign
-- keys hold), each by the tenant's id.
DELETE FROM invoice_attempts WHERE tenant = %(tenant)s

-- delete_invoice_events --
DELETE FROM invoice_events WHERE tenant = %(tenant)s

-- delete_invoices --
DELETE FROM invoices WHERE tenant = %(tenant)s

-- delete_dunning_settings --
DELETE FROM dunning_settings WHERE tenant = %(tenant)s

-- delete_merchant_tags --
DELETE FROM merchant_tags WHERE tenant = %(tenant)s

-- delete_intake_events --
DELETE FROM intake_events WHERE tenant = %(tenant)s

-- delete_intake_settings --
DELETE FROM intake_settings WHERE tenant = %(tenant)s

-- delete_hosted_charges --
DELETE FROM hosted_charges WHERE tenant = %(tenant)s

-- delete_hosted_charging --
DELETE FROM hosted_charging WHERE tenant = %(tenant)s

-- delete_emails --
DELETE FROM emails WHERE tenant = %(tenant)s

-- delete_message_settings --
DELETE FROM message_settings WHERE tenant = %(tenant)s

-- delete_payment_pages --
DELETE FROM payment_pages WHERE tenant = %(tenant)s

-- delete_idempotency_keys --
DELETE FROM idempotency_keys WHERE tenant = %(tenant)s

-- delete_operator_actions --
DELETE FROM operator_actions WHERE tenant = %(tenant)s

-- delete_api_tokens --
DELETE FROM api_tokens WHERE tenant = %(tenant)s

-- delete_runs --
DELETE FROM runs WHERE tenant = %(tenant)s

-- delete_jobs --
DELETE FROM jobs WHERE tenant = %(tenant)s

-- delete_schedules --
DELETE FROM schedules WHERE tenant = %(tenant)s

-- delete_flow_keys --
DELETE FROM flow_keys WHERE tenant = %(tenant)s

-- delete_tenants --
DELETE FROM tenants WHERE id = %(tenant)s

-- delete_customers --
DELETE FROM customers WHERE tenant = %(tenant)s

-- delete_renewals --
DELETE FROM renewals WHERE tenant = %(tenant)s
