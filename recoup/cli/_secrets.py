"""The secret key and the Stripe access of a command's process, from its environment: the
box that seals provider secrets (`recoup.sealed`) and the tenants' Stripe accounts."""

from __future__ import annotations

import os

from recoup.recovery.hosted_charging import StripeAccounts
from recoup.sealed import Box, secret_box_for
from recoup.storage import sqlite_path

STRIPE_API_BASE_ENV = "RECOUP_STRIPE_API_BASE"  # another Stripe-compatible server (tests)


def secret_box(db_url: str) -> Box:
    """`RECOUP_SECRET_KEY`, else the key file beside a SQLite file (made on first use)."""
    path = sqlite_path(db_url)
    return secret_box_for(None if path in (None, ":memory:") else path, os.environ)


def stripe_accounts(box: Box) -> StripeAccounts:
    """The tenants' Stripe accounts, at Stripe's API or at `RECOUP_STRIPE_API_BASE`."""
    return StripeAccounts(box, api_base=os.environ.get(STRIPE_API_BASE_ENV) or None)


__all__ = ["STRIPE_API_BASE_ENV", "secret_box", "stripe_accounts"]
