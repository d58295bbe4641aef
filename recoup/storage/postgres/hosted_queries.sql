-- Named queries of hosted charging on PostgreSQL (see migrations/0010_hosted_charging.sql).

-- _charge_columns --
tenant, charge_key, invoice_id, attempt, state, provider_charge_id, decline_code, advice_code,
request_id, calls, created_at, updated_at

-- get_hosted_charging --
SELECT tenant, provider, api_key, updated_at FROM hosted_charging WHERE tenant = %(tenant)s

-- put_hosted_charging --
INSERT INTO hosted_charging (tenant, provider, api_key, updated_at)
VALUES (%(tenant)s, %(provider)s, %(api_key)s, %(updated_at)s)
ON CONFLICT (tenant) DO UPDATE
SET provider = excluded.provider, api_key = excluded.api_key, updated_at = excluded.updated_at
RETURNING tenant, provider, api_key, updated_at

-- remove_hosted_charging --
DELETE FROM hosted_charging WHERE tenant = %(tenant)s

-- list_hosted_charging --
SELECT tenant, provider, api_key, updated_at FROM hosted_charging ORDER BY tenant

-- get_hosted_charge --
SELECT {_charge_columns}
FROM hosted_charges WHERE tenant = %(tenant)s AND charge_key = %(charge_key)s

-- begin_hosted_charge --
-- The primary key decides between two tries of one attempt: the first row stays.
INSERT INTO hosted_charges ({_charge_columns})
VALUES (
        %(tenant)s, %(charge_key)s, %(invoice_id)s, %(attempt)s, %(state)s,
        %(provider_charge_id)s, %(decline_code)s, %(advice_code)s, %(request_id)s,
        %(calls)s, %(created_at)s, %(updated_at)s
)
ON CONFLICT (tenant, charge_key) DO NOTHING

-- record_hosted_charge --
UPDATE hosted_charges
SET state = %(state)s, provider_charge_id = %(provider_charge_id)s,
    decline_code = %(decline_code)s, advice_code = %(advice_code)s,
    request_id = %(request_id)s, calls = %(calls)s, updated_at = %(updated_at)s
WHERE tenant = %(tenant)s AND charge_key = %(charge_key)s
RETURNING {_charge_columns}

-- hosted_charges --
SELECT {_charge_columns}
FROM hosted_charges WHERE tenant = %(tenant)s AND invoice_id = %(invoice_id)s
ORDER BY attempt
