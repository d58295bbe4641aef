-- Named queries of a tenant's life after creation on SQLite (migration 0007): disabling and
-- enabling, rotating the signing secret, deleting with every row. Every block runs inside one
-- write transaction (`SqlTenantTables`).

-- disable_tenant --
UPDATE tenants SET disabled_at = coalesce(disabled_at, :now) WHERE id = :id

-- enable_tenant --
UPDATE tenants SET disabled_at = NULL WHERE id = :id

-- hold_jobs --
-- Out of jobs_due: no claim of another tenant steps over them while this one is disabled.
UPDATE jobs SET held = 1 WHERE tenant = :tenant AND state = 'scheduled' AND held = 0

-- release_held_jobs --
UPDATE jobs SET held = 0 WHERE tenant = :tenant AND state = 'scheduled' AND held = 1

-- replace_signing_secret --
-- previous_until NULL: the current secret stops signing at once.
UPDATE tenants
SET previous_signing_secret =
        CASE WHEN :previous_until IS NULL THEN NULL ELSE signing_secret END,
    previous_secret_until = :previous_until,
    signing_secret = :secret
WHERE id = :id

-- tenant_state --
SELECT disabled_at FROM tenants WHERE id = :id

-- running_jobs_of_tenant --
SELECT count(*) FROM jobs WHERE tenant = :tenant AND state = 'running'

-- delete_invoice_attempts --
-- The delete_* blocks run in this order (children before the rows they reference; foreign
-- keys are on), each by the tenant's id.
DELETE FROM invoice_attempts WHERE tenant = :tenant

-- delete_invoice_events --
DELETE FROM invoice_events WHERE tenant = :tenant

-- delete_invoices --
DELETE FROM invoices WHERE tenant = :tenant

-- delete_dunning_settings --
DELETE FROM dunning_settings WHERE tenant = :tenant

-- delete_merchant_tags --
DELETE FROM merchant_tags WHERE tenant = :tenant

-- delete_intake_events --
DELETE FROM intake_events WHERE tenant = :tenant

-- delete_intake_settings --
DELETE FROM intake_settings WHERE tenant = :tenant

-- delete_hosted_charges --
DELETE FROM hosted_charges WHERE tenant = :tenant

-- delete_hosted_charging --
DELETE FROM hosted_charging WHERE tenant = :tenant

-- delete_emails --
DELETE FROM emails WHERE tenant = :tenant

-- delete_message_settings --
DELETE FROM message_settings WHERE tenant = :tenant

-- delete_payment_pages --
DELETE FROM payment_pages WHERE tenant = :tenant

-- delete_idempotency_keys --
DELETE FROM idempotency_keys WHERE tenant = :tenant

-- delete_operator_actions --
DELETE FROM operator_actions WHERE tenant = :tenant

-- delete_api_tokens --
DELETE FROM api_tokens WHERE tenant = :tenant

-- delete_runs --
DELETE FROM runs WHERE tenant = :tenant

-- delete_jobs --
DELETE FROM jobs WHERE tenant = :tenant

-- delete_schedules --
DELETE FROM schedules WHERE tenant = :tenant

-- delete_flow_keys --
DELETE FROM flow_keys WHERE tenant = :tenant

-- delete_tenants --
DELETE FROM tenants WHERE id = :tenant

-- delete_customers --
DELETE FROM customers WHERE tenant = :tenant

-- delete_renewals --
DELETE FROM renewals WHERE tenant = :tenant
