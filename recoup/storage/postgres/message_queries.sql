-- Named queries of customers' emails on PostgreSQL (see migrations/0011_messages.sql).

-- _settings_columns --
tenant, smtp_url, email_from, reply_to, update_card_url, templates_dir, allow_unsubscribe,
updated_at

-- _email_columns --
tenant, message_key, kind, customer_id, invoice_id, send_at, state, job_id, recipient,
message_id, smtp_reply, tries, job_attempt, created_at, updated_at, sent_at

-- get_message_settings --
SELECT {_settings_columns} FROM message_settings WHERE tenant = %(tenant)s

-- put_message_settings --
INSERT INTO message_settings ({_settings_columns})
VALUES (%(tenant)s, %(smtp_url)s, %(email_from)s, %(reply_to)s, %(update_card_url)s, %(templates_dir)s,
        %(allow_unsubscribe)s, %(updated_at)s)
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
VALUES (%(tenant)s, %(message_key)s, %(kind)s, %(customer_id)s, %(invoice_id)s, %(send_at)s, %(state)s, %(job_id)s,
        %(recipient)s, %(message_id)s, %(smtp_reply)s, %(tries)s, %(job_attempt)s, %(created_at)s, %(updated_at)s, %(sent_at)s)
ON CONFLICT (tenant, message_key) DO NOTHING

-- get_email --
SELECT {_email_columns} FROM emails WHERE tenant = %(tenant)s AND message_key = %(message_key)s

-- record_email --
UPDATE emails
SET state = %(state)s, recipient = %(recipient)s, message_id = %(message_id)s,
    smtp_reply = %(smtp_reply)s, tries = %(tries)s, job_attempt = %(job_attempt)s, updated_at = %(updated_at)s, sent_at = %(sent_at)s,
    job_id = coalesce(%(job_id)s, job_id)
WHERE tenant = %(tenant)s AND message_key = %(message_key)s AND state = %(was)s AND tries = %(was_tries)s
RETURNING {_email_columns}

-- invoice_emails --
SELECT {_email_columns} FROM emails
WHERE tenant = %(tenant)s AND invoice_id = %(invoice_id)s
ORDER BY send_at, message_key

-- email_counts --
SELECT kind, state, count(*) FROM emails WHERE tenant = %(tenant)s GROUP BY kind, state

-- put_payment_page --
INSERT INTO payment_pages (tenant, invoice_id, url, updated_at)
VALUES (%(tenant)s, %(invoice_id)s, %(url)s, %(updated_at)s)
ON CONFLICT (tenant, invoice_id) DO UPDATE SET url = excluded.url, updated_at = excluded.updated_at

-- payment_page --
SELECT url FROM payment_pages WHERE tenant = %(tenant)s AND invoice_id = %(invoice_id)s
