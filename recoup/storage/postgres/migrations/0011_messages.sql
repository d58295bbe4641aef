-- Recoup on PostgreSQL, version 11: customers' emails (see recoup/recovery/email_store.py).

-- A tenant's email settings. The SMTP URL (with its password) is stored sealed
-- (recoup/sealed.py); no row, or no SMTP URL: no emails.
CREATE TABLE message_settings (
    tenant text COLLATE "C" PRIMARY KEY,
    smtp_url text CHECK (left(smtp_url, 10) = 'sealed:v1:'),
    email_from text CHECK (length(email_from) BETWEEN 3 AND 320),
    reply_to text CHECK (length(reply_to) BETWEEN 3 AND 320),
    update_card_url text CHECK (strpos(update_card_url, '{token}') > 0),
    templates_dir text,
    allow_unsubscribe boolean NOT NULL,
    updated_at timestamptz NOT NULL
);

-- The email ledger: one row per message key, written `planned` with its job, `sending` (with
-- the Message-ID it carries) before the SMTP server is given it and `sent` after it accepted
-- it, so that a message is sent once per event and a resend after a crash carries the same
-- Message-ID.
CREATE TABLE emails (
    tenant text COLLATE "C" NOT NULL,
    message_key text COLLATE "C" NOT NULL CHECK (length(message_key) BETWEEN 1 AND 100),
    kind text NOT NULL CHECK (length(kind) BETWEEN 1 AND 40),
    customer_id text COLLATE "C" NOT NULL,
    invoice_id text COLLATE "C",
    send_at timestamptz NOT NULL,
    state text NOT NULL CHECK (state IN ('planned', 'sending', 'sent', 'suppressed', 'failed',
                                         'cancelled')),
    job_id text,
    recipient text,
    message_id text,
    smtp_reply text,  -- the server's reply, or why nothing was sent
    tries integer NOT NULL DEFAULT 0 CHECK (tries >= 0),  -- times handed to an SMTP server
    job_attempt integer,  -- the attempt of its job that last set it sending
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    sent_at timestamptz,
    PRIMARY KEY (tenant, message_key),
    CONSTRAINT sent_at_only_when_sent CHECK ((sent_at IS NULL) = (state <> 'sent')),
    CONSTRAINT message_id_once_sending
        CHECK (message_id IS NOT NULL OR state NOT IN ('sending', 'sent'))
);

CREATE INDEX emails_invoice ON emails (tenant, invoice_id, send_at) WHERE invoice_id IS NOT NULL;

-- Where the provider lets the invoice's customer pay or update the card without a login
-- (Stripe's hosted_invoice_url), as the intake last read it: the emails' link.
CREATE TABLE payment_pages (
    tenant text COLLATE "C" NOT NULL,
    invoice_id text COLLATE "C" NOT NULL,
    url text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, invoice_id)
);
