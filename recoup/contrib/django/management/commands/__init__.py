"""`recoup_prune_idempotency` and `recoup_reconcile`: the receiver's upkeep from manage.py."""
