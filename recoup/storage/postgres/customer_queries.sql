-- Named queries of customers and their renewals on PostgreSQL (see migrations/0012_customers.sql).

-- _customer_columns --
tenant, customer_id, email, name, locale, access, access_changed_at, suppressed_at,
suppressed_reason, updated_at

-- _renewal_columns --
tenant, renewal_id, customer_id, renews_at, amount, currency, timezone, exp_month, exp_year,
reminder_job_id, state, created_at, updated_at

-- get_customer --
SELECT {_customer_columns}
FROM customers WHERE tenant = %(tenant)s AND customer_id = %(customer_id)s

-- put_customer --
-- What is given replaces what is stored (NULL: kept); another mailbox clears a suppression.
INSERT INTO customers (tenant, customer_id, email, name, locale, updated_at)
VALUES (%(tenant)s, %(customer_id)s, %(email)s, %(name)s, %(locale)s, %(at)s)
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
VALUES (%(tenant)s, %(customer_id)s, %(email)s, %(at)s, %(reason)s, %(at)s)
ON CONFLICT (tenant, customer_id) DO UPDATE
SET email = coalesce(customers.email, excluded.email),
    suppressed_at = coalesce(customers.suppressed_at, excluded.suppressed_at),
    suppressed_reason = coalesce(customers.suppressed_reason, excluded.suppressed_reason),
    updated_at = excluded.updated_at
WHERE customers.email IS NULL OR lower(customers.email) = lower(excluded.email)

-- set_customer_access --
INSERT INTO customers (tenant, customer_id, access, access_changed_at, updated_at)
VALUES (%(tenant)s, %(customer_id)s, %(access)s, %(at)s, %(at)s)
ON CONFLICT (tenant, customer_id) DO UPDATE
SET access = excluded.access, access_changed_at = excluded.access_changed_at,
    updated_at = excluded.updated_at
RETURNING {_customer_columns}

-- put_renewal --
INSERT INTO renewals ({_renewal_columns})
VALUES (
    %(tenant)s, %(renewal_id)s, %(customer_id)s, %(renews_at)s, %(amount)s, %(currency)s,
    %(timezone)s, %(exp_month)s, %(exp_year)s, %(reminder_job_id)s, %(state)s, %(created_at)s,
    %(updated_at)s
)
ON CONFLICT (tenant, renewal_id) DO UPDATE
SET amount = excluded.amount, currency = excluded.currency, timezone = excluded.timezone,
    exp_month = excluded.exp_month, exp_year = excluded.exp_year,
    reminder_job_id = excluded.reminder_job_id, state = excluded.state,
    updated_at = excluded.updated_at
RETURNING {_renewal_columns}

-- get_renewal --
SELECT {_renewal_columns}
FROM renewals WHERE tenant = %(tenant)s AND renewal_id = %(renewal_id)s

-- customer_renewals --
SELECT {_renewal_columns}
FROM renewals
WHERE tenant = %(tenant)s AND customer_id = %(customer_id)s
  AND (%(state)s::text IS NULL OR state = %(state)s)
ORDER BY renews_at, renewal_id

-- ensure_customer --
INSERT INTO customers (tenant, customer_id, updated_at)
VALUES (%(tenant)s, %(customer_id)s, %(at)s)
ON CONFLICT (tenant, customer_id) DO NOTHING

-- lock_customer --
-- Locked until the transaction ends: two invoices of one customer changing at once
-- decide the customer's access one after the other, each seeing the other's result.
SELECT {_customer_columns}
FROM customers WHERE tenant = %(tenant)s AND customer_id = %(customer_id)s
FOR UPDATE

-- customer_invoices --
-- The invoices that hold a customer's access back (recovered and cancelled ones hold nothing).
SELECT invoice_id, state, final_action, failed_at, policy
FROM invoices
WHERE tenant = %(tenant)s AND customer_id = %(customer_id)s
  AND state IN ('retrying', 'awaiting_customer', 'exhausted')
ORDER BY created_at, invoice_id
