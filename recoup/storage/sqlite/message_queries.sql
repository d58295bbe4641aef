-- Named queries of customers' emails on SQLite (see migrations/0011_messages.sql).

-- _settings_columns --
tenant, smtp_url, email_from, reply_to, update_card_url, templates_dir, allow_unsubscribe,
updated_at

-- _email_columns --
tenant, message_key, kind, customer_id, invoice_id, send_at, state, job_id, recipient,
message_id, smtp_reply, tries, job_attempt, created_at, updated_at, sent_at

-- get_message_settings --
SELECT {_settings_columns} FROM message_settings WHERE tenant = :tenant

-- put_message_settings --
INSERT INTO message_settings ({_settings_columns})
VALUES (:tenant, :smtp_url, :email_from, :reply_to, :update_card_url, :templates_dir,
        :allow_unsubscribe, :updated_at)
ON CONFLICT (tenant) DO UPDATE
SET smtp_url = excluded.smtp_url, email_from = excluded.email_from,
    reply_to = excluded.reply_to, update_card_url = excluded.update_card_url,
    templates_dir = excluded.templates_dir, allow_unsubscribe = excluded.allow_unsubscribe,
    updated_at = excluded.updated_at
RETURNING {_settings_columns}

-- list_message_settings --
SELECT {_settings_columns} FROM message_settings ORDER BY tenant

-- plan_email --
-- The primary key decides between two plans of one message: the first row stays.
INSERT INTO emails ({_email_columns})
VALUES (:tenant, :message_key, :kind, :customer_id, :invoice_id, :send_at, :state, :job_id,
        :recipient, :message_id, :smtp_reply, :tries, :job_attempt, :created_at, :updated_at, :sent_at)
ON CONFLICT (tenant, message_key) DO NOTHING

-- get_email --
SELECT {_email_columns} FROM emails WHERE tenant = :tenant AND message_key = :message_key

-- record_email --
UPDATE emails
SET state = :state, recipient = :recipient, message_id = :message_id,
    smtp_reply = :smtp_reply, tries = :tries, job_attempt = :job_attempt, updated_at = :updated_at, sent_at = :sent_at,
    job_id = coalesce(:job_id, job_id)
WHERE tenant = :tenant AND message_key = :message_key AND state = :was AND tries = :was_tries
RETURNING {_email_columns}

-- invoice_emails --
SELECT {_email_columns} FROM emails
WHERE tenant = :tenant AND invoice_id = :invoice_id
ORDER BY send_at, message_key

-- email_counts --
SELECT kind, state, count(*) FROM emails WHERE tenant = :tenant GROUP BY kind, state

-- put_payment_page --
INSERT INTO payment_pages (tenant, invoice_id, url, updated_at)
VALUES (:tenant, :invoice_id, :url, :updated_at)
ON CONFLICT (tenant, invoice_id) DO UPDATE SET url = excluded.url, updated_at = excluded.updated_at

-- payment_page --
SELECT url FROM payment_pages WHERE tenant = :tenant AND invoice_id = :invoice_id
