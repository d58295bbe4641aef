"""A customer's access state, as their invoices in dunning give it (pure)."""

from __future__ import annotations

from enum import StrEnum


class Access(StrEnum):
    """What a customer may use while their payments are in dunning: the one field an app
    gates features on."""

    ACTIVE = "active"  # nothing owed, or dunning only just began (within the grace period)
    GRACE = "grace"
    RESTRICTED = "restricted"
    PAUSED = "paused"


__all__ = ["Access"]
