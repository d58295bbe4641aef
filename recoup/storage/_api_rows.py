"""The mapping between the HTTP API's records (tokens, tenants) and table rows, shared by the
SQLite and PostgreSQL `api_tables`; as in `_rows`, only the instant codec differs by backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recoup.api.tokens import TenantInfo, TokenInfo
from recoup.storage._rows import DecodeInstant

RETRY_AFTER_SECONDS = 1  # an in-flight request usually ends within milliseconds


def token_from_row(row: Sequence[Any], instant: DecodeInstant) -> TokenInfo:
    """A row of `id, tenant, prefix, label, created_at, revoked_at` (the `*_token` queries)."""
    return TokenInfo(
        id=row[0],
        tenant=row[1],
        prefix=row[2],
        label=row[3],
        created_at=instant(row[4]),
        revoked_at=None if row[5] is None else instant(row[5]),
    )


def tenant_info_from_row(row: Sequence[Any], instant: DecodeInstant) -> TenantInfo:
    """A row of `id, name, created_at` (the `list_tenants` query)."""
    return TenantInfo(id=row[0], name=row[1], created_at=instant(row[2]))
