-- Named queries of the intake tables on SQLite (see migrations/0008_intake.sql).

-- get_intake_settings --
SELECT tenant, stripe_webhook_secret, default_timezone, updated_at
FROM intake_settings WHERE tenant = :tenant

-- put_intake_settings --
INSERT INTO intake_settings (tenant, stripe_webhook_secret, default_timezone, updated_at)
VALUES (:tenant, :stripe_webhook_secret, :default_timezone, :updated_at)
ON CONFLICT (tenant) DO UPDATE
SET stripe_webhook_secret = excluded.stripe_webhook_secret,
    default_timezone = excluded.default_timezone, updated_at = excluded.updated_at
RETURNING tenant, stripe_webhook_secret, default_timezone, updated_at

-- claim_event --
-- The primary key decides a race between concurrent first deliveries (the write lock is held
-- already: the second sees the first's row).
INSERT INTO intake_events (tenant, provider, event_id, type, invoice_id, occurred_at, claimed_at)
VALUES (:tenant, :provider, :event_id, :type, :invoice_id, :occurred_at, :now)
ON CONFLICT (tenant, provider, event_id) DO NOTHING
RETURNING 1

-- get_event --
SELECT claimed_at, outcome, answer FROM intake_events
WHERE tenant = :tenant AND provider = :provider AND event_id = :event_id

-- take_over_event --
-- Compare-and-set on the stale claim: of two takers, one changes the row.
UPDATE intake_events SET claimed_at = :now
WHERE tenant = :tenant AND provider = :provider AND event_id = :event_id
  AND outcome IS NULL AND claimed_at = :claimed_at
RETURNING 1

-- finish_event --
-- Only by the claim's holder: a delivery whose claim was taken over must not overwrite the
-- taker's answer.
UPDATE intake_events SET outcome = :outcome, answer = :answer, finished_at = :now
WHERE tenant = :tenant AND provider = :provider AND event_id = :event_id
  AND outcome IS NULL AND claimed_at = :claimed_at

-- release_event --
DELETE FROM intake_events
WHERE tenant = :tenant AND provider = :provider AND event_id = :event_id
  AND outcome IS NULL AND claimed_at = :claimed_at

-- invoice_event_since --
SELECT EXISTS (
    SELECT 1 FROM intake_events
    WHERE tenant = :tenant AND provider = :provider AND invoice_id = :invoice_id
      AND occurred_at >= :since AND outcome IS NOT NULL
      AND type IN (SELECT value FROM json_each(:types))
)

-- prune_events --
DELETE FROM intake_events WHERE rowid IN (
    SELECT rowid FROM intake_events
    WHERE finished_at IS NOT NULL AND finished_at < :before
    ORDER BY finished_at LIMIT :limit
)
