"""Messages to the customer: which email, when, in which words (pure: `kinds`, `planning`,
`rendering`'s templates and context), and the update-card link's token (`tokens`).

| event (lifecycle)                         | kind            | when (inside the local window)  |
|-------------------------------------------|-----------------|---------------------------------|
| the opening: `invoice.retry_scheduled` or  | `payment_failed`| at the failure                  |
| `invoice.awaiting_customer` (first events) |                 |                                 |
| `invoice.retry_failed`, more than one left | `retry_failed`  | at the failed retry             |
| `invoice.retry_failed`, the next is last   | `final_warning` | at the failed retry             |
| `invoice.recovered`                        | `recovered`     | at the payment                  |
| `invoice.exhausted`                        | `exhausted`     | when no attempt is left         |
| a renewal the card will not reach          | `card_expiring` | renewal − card_expiry_days_before |

Nothing is sent after recovery, for a cancelled (stopped) invoice, for a kind the policy's
`[messages] send` leaves out, or when `enabled = false`. Sending (settings, SMTP, the ledger,
the jobs) is `recovery`'s (`email_settings`, `email_store`, `emails`) and `channel`'s (SMTP);
the pure modules here import no jinja2 or babel at module level, so the core install can plan
messages without the `email` extra. `preview` is what `recoup emails preview` and the
dashboard show (`recovery.email_preview` with a tenant's settings).
"""
