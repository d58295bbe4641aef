-- Named queries of the intake tables on PostgreSQL (see migrations/0008_intake.sql).

-- get_intake_settings --
SELECT tenant, stripe_webhook_secret, default_timezone, updated_at
FROM intake_settings WHERE tenant = %(tenant)s

-- put_intake_settings --
INSERT INTO intake_settings (tenant, stripe_webhook_secret, default_timezone, updated_at)
VALUES (%(tenant)s, %(stripe_webhook_secret)s, %(default_timezone)s, %(updated_at)s)
ON CONFLICT (tenant) DO UPDATE
SET stripe_webhook_secret = excluded.stripe_webhook_secret,
    default_timezone = excluded.default_timezone, updated_at = excluded.updated_at
RETURNING tenant, stripe_webhook_secret, default_timezone, updated_at

-- claim_event --
-- The primary key decides a race between concurrent first deliveries: one insert wins, the
-- others wait for it to commit and then insert nothing (and read its row next).
INSERT INTO intake_events (tenant, provider, event_id, type, invoice_id, occurred_at, claimed_at)
VALUES (%(tenant)s, %(provider)s, %(event_id)s, %(type)s, %(invoice_id)s, %(occurred_at)s,
        %(now)s)
ON CONFLICT (tenant, provider, event_id) DO NOTHING
RETURNING 1

-- get_event --
SELECT claimed_at, outcome, answer FROM intake_events
WHERE tenant = %(tenant)s AND provider = %(provider)s AND event_id = %(event_id)s

-- take_over_event --
-- Compare-and-set on the stale claim: of two takers, one changes the row.
UPDATE intake_events SET claimed_at = %(now)s
WHERE tenant = %(tenant)s AND provider = %(provider)s AND event_id = %(event_id)s
  AND outcome IS NULL AND claimed_at = %(claimed_at)s
RETURNING 1

-- finish_event --
-- Only by the claim's holder: a delivery whose claim was taken over must not overwrite the
-- taker's answer.
UPDATE intake_events
SET outcome = %(outcome)s, answer = %(answer)s::jsonb, finished_at = %(now)s
WHERE tenant = %(tenant)s AND provider = %(provider)s AND event_id = %(event_id)s
  AND outcome IS NULL AND claimed_at = %(claimed_at)s

-- release_event --
DELETE FROM intake_events
WHERE tenant = %(tenant)s AND provider = %(provider)s AND event_id = %(event_id)s
  AND outcome IS NULL AND claimed_at = %(claimed_at)s

-- invoice_event_since --
SELECT EXISTS (
    SELECT 1 FROM intake_events
    WHERE tenant = %(tenant)s AND provider = %(provider)s AND invoice_id = %(invoice_id)s
      AND occurred_at >= %(since)s AND outcome IS NOT NULL AND type = ANY(%(types)s)
)

-- prune_events --
WITH doomed AS (
    SELECT tenant, provider, event_id FROM intake_events
    WHERE finished_at IS NOT NULL AND finished_at < %(before)s
    ORDER BY finished_at LIMIT %(limit)s
)
DELETE FROM intake_events e USING doomed d
WHERE e.tenant = d.tenant AND e.provider = d.provider AND e.event_id = d.event_id
