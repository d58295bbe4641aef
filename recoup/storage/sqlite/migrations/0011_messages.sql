-- Recoup on SQLite, version 11: customers' emails (see recoup/recovery/email_store.py).

-- A tenant's email settings. The SMTP URL (with its password) is stored sealed
-- (recoup/sealed.py); no row, or no SMTP URL: no emails.
CREATE TABLE message_settings (
    tenant TEXT PRIMARY KEY,
    smtp_url TEXT CHECK (smtp_url IS NULL OR substr(smtp_url, 1, 10) = 'sealed:v1:'),
    email_from TEXT CHECK (email_from IS NULL OR length(email_from) BETWEEN 3 AND 320),
    reply_to TEXT CHECK (reply_to IS NULL OR length(reply_to) BETWEEN 3 AND 320),
    update_card_url TEXT CHECK (update_card_url IS NULL OR instr(update_card_url, '{token}') > 0),
    templates_dir TEXT,
    allow_unsubscribe INTEGER NOT NULL CHECK (allow_unsubscribe IN (0, 1)),
    updated_at INTEGER NOT NULL
) STRICT;

-- The email ledger: one row per message key, written `planned` with its job, `sending` (with
-- the Message-ID it carries) before the SMTP server is given it and `sent` after it accepted
-- it, so that a message is sent once per event and a resend after a crash carries the same
-- Message-ID.
CREATE TABLE emails (
    tenant TEXT NOT NULL,
    message_key TEXT NOT NULL CHECK (length(message_key) BETWEEN 1 AND 100),
    kind TEXT NOT NULL CHECK (length(kind) BETWEEN 1 AND 40),
    customer_id TEXT NOT NULL,
    invoice_id TEXT,
    send_at INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('planned', 'sending', 'sent', 'suppressed', 'failed',
                                         'cancelled')),
    job_id TEXT,
    recipient TEXT,
    message_id TEXT,
    smtp_reply TEXT,  -- the server's reply, or why nothing was sent
    tries INTEGER NOT NULL DEFAULT 0 CHECK (tries >= 0),  -- times handed to an SMTP server
    job_attempt INTEGER,  -- the attempt of its job that last set it sending
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    sent_at INTEGER,
    PRIMARY KEY (tenant, message_key),
    CONSTRAINT sent_at_only_when_sent CHECK ((sent_at IS NULL) = (state <> 'sent')),
    CONSTRAINT message_id_once_sending
        CHECK (message_id IS NOT NULL OR state NOT IN ('sending', 'sent'))
) STRICT;

CREATE INDEX emails_invoice ON emails (tenant, invoice_id, send_at) WHERE invoice_id IS NOT NULL;

-- Where the provider lets the invoice's customer pay or update the card without a login
-- (Stripe's hosted_invoice_url), as the intake last read it: the emails' link.
CREATE TABLE payment_pages (
    tenant TEXT NOT NULL,
    invoice_id TEXT NOT NULL,
    url TEXT NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, invoice_id)
) STRICT;
