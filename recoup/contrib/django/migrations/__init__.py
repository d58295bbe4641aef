"""Django migrations of the recoup app: the receiver's idempotency records and charge ledger."""
