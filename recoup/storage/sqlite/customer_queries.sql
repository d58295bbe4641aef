-- Named queries of customers and their renewals on SQLite (see migrations/0012_customers.sql).

-- _customer_columns --
tenant, customer_id, email, name, locale, access, access_changed_at, suppressed_at,
suppressed_reason, updated_at

-- _renewal_columns --
tenant, renewal_id, customer_id, renews_at, amount, currency, timezone, exp_month, exp_year,
reminder_job_id, state, created_at, updated_at

-- get_customer --
SELECT {_customer_columns}
FROM customers WHERE tenant = :tenant AND customer_id = :customer_id

-- put_customer --
-- What is given replaces what is stored (NULL: kept); another mailbox clears a suppression.
INSERT INTO customers (tenant, customer_id, email, name, locale, updated_at)
VALUES (:tenant, :customer_id, :email, :name, :locale, :at)
ON CONFLICT (tenant, customer_id) DO UPDATE
SET email = coalesce(excluded.email, customers.email),
    name = coalesce(excluded.name, customers.name),
    locale = coalesce(excluded.locale, customers.locale),
    suppressed_at = CASE
        WHEN excluded.email IS NULL OR lower(excluded.email) = lower(customers.email)
        THEN customers.suppressed_at END,
    suppressed_reason = CASE
        WHEN excluded.email IS NULL OR lower(excluded.email) = lower(customers.email)
        THEN customers.suppressed_reason END,
    updated_at = excluded.updated_at
RETURNING {_customer_columns}

-- suppress_customer --
-- Only the address still stored is suppressed; the first suppression's instant and reason stay.
INSERT INTO customers (tenant, customer_id, email, suppressed_at, suppressed_reason, updated_at)
VALUES (:tenant, :customer_id, :email, :at, :reason, :at)
ON CONFLICT (tenant, customer_id) DO UPDATE
SET email = coalesce(customers.email, excluded.email),
    suppressed_at = coalesce(customers.suppressed_at, excluded.suppressed_at),
    suppressed_reason = coalesce(customers.suppressed_reason, excluded.suppressed_reason),
    updated_at = excluded.updated_at
WHERE customers.email IS NULL OR lower(customers.email) = lower(excluded.email)

-- set_customer_access --
INSERT INTO customers (tenant, customer_id, access, access_changed_at, updated_at)
VALUES (:tenant, :customer_id, :access, :at, :at)
ON CONFLICT (tenant, customer_id) DO UPDATE
SET access = excluded.access, access_changed_at = excluded.access_changed_at,
    updated_at = excluded.updated_at
RETURNING {_customer_columns}

-- put_renewal --
INSERT INTO renewals ({_renewal_columns})
VALUES (
    :tenant, :renewal_id, :customer_id, :renews_at, :amount, :currency, :timezone, :exp_month,
    :exp_year, :reminder_job_id, :state, :created_at, :updated_at
)
ON CONFLICT (tenant, renewal_id) DO UPDATE
SET amount = excluded.amount, currency = excluded.currency, timezone = excluded.timezone,
    exp_month = excluded.exp_month, exp_year = excluded.exp_year,
    reminder_job_id = excluded.reminder_job_id, state = excluded.state,
    updated_at = excluded.updated_at
RETURNING {_renewal_columns}

-- get_renewal --
SELECT {_renewal_columns}
FROM renewals WHERE tenant = :tenant AND renewal_id = :renewal_id

-- customer_renewals --
SELECT {_renewal_columns}
FROM renewals
WHERE tenant = :tenant AND customer_id = :customer_id AND (:state IS NULL OR state = :state)
ORDER BY renews_at, renewal_id

-- ensure_customer --
INSERT INTO customers (tenant, customer_id, updated_at)
VALUES (:tenant, :customer_id, :at)
ON CONFLICT (tenant, customer_id) DO NOTHING

-- lock_customer --
-- The write transaction holds SQLite's one write lock: the row needs none of its own.
SELECT {_customer_columns}
FROM customers WHERE tenant = :tenant AND customer_id = :customer_id

-- customer_invoices --
-- The invoices that hold a customer's access back (recovered and cancelled ones hold nothing).
SELECT invoice_id, state, final_action, failed_at, policy
FROM invoices
WHERE tenant = :tenant AND customer_id = :customer_id
  AND state IN ('retrying', 'awaiting_customer', 'exhausted')
ORDER BY created_at, invoice_id
