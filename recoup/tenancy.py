"""Tenancy: who the jobs belong to and who may act for them. Not HTTP: the CLI manages tenants
and tokens with it, the HTTP API authenticates with it, and the storage backends keep its
records.

- A **tenant** (`Tenant`, the record the job store keeps) owns jobs, schedules and invoices,
  and signs its outbound requests with its own Standard Webhooks secret
  (`new_signing_secret`, made in `recoup.jobs.signing`, which signs the requests).
- An **API token** is a bearer secret scoped to one tenant, stored only as a hash. A token is
  `rcp_` + 43 characters of URL-safe base64 (32 random bytes). Only its sha256 is stored: a
  token has 256 bits of entropy, so a plain hash is as strong as a slow KDF here, and a lookup
  by hash needs no constant-time comparison (the comparison happens on the digest, not on the
  secret). The first characters after the prefix are kept in clear as the token's `prefix`,
  so an operator can tell tokens apart in a list.

`TenantStore` and `TokenStore` are implemented by every storage backend (`recoup.storage`).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from recoup.jobs.model import Tenant, new_id
from recoup.jobs.signing import SIGNING_SECRET_BYTES, new_signing_secret
from recoup.timekeeping.instants import require_aware

TOKEN_PREFIX = "rcp_"
TOKEN_BYTES = 32  # random bytes in a token's secret
DISPLAY_PREFIX_LENGTH = 8  # characters after `rcp_` kept in clear
TOKEN_MAX_LENGTH = 200  # longer bearer values are refused before hashing


@dataclass(frozen=True, kw_only=True)
class TokenInfo:
    """A stored token, without its secret."""

    id: str
    tenant: str
    prefix: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None

    def __post_init__(self) -> None:
        require_aware("created_at", self.created_at)

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True, kw_only=True)
class TenantInfo:
    """A tenant as an operator lists it (its signing secret left out)."""

    id: str
    name: str
    created_at: datetime


@dataclass(frozen=True, kw_only=True)
class IssuedToken:
    """A token just created: the only time its secret is known."""

    info: TokenInfo
    secret: str


class TenantStore(Protocol):
    """Stored tenants (the job store's `tenants` table)."""

    def ensure_tenant(self, tenant: Tenant) -> Tenant:
        """Insert the tenant unless one with its id exists; return the stored one (so every
        process agrees on one signing secret)."""
        ...

    def get_tenant(self, tenant_id: str) -> Tenant | None: ...

    def list_tenants(self) -> list[TenantInfo]:
        """Every tenant, oldest first."""
        ...


class TokenStore(Protocol):
    """Stored API tokens (hashes only)."""

    def add_token(
        self,
        *,
        token_id: str,
        tenant: str,
        token_hash: str,
        prefix: str,
        label: str | None,
        now: datetime,
    ) -> TokenInfo: ...

    def tenant_for_token_hash(self, token_hash: str) -> str | None:
        """The tenant of an active (not revoked) token with that hash."""
        ...

    def list_tokens(self, tenant: str | None = None) -> list[TokenInfo]:
        """Tokens, oldest first; of one tenant, or all."""
        ...

    def revoke_token(self, token_id: str, *, now: datetime) -> TokenInfo | None:
        """Revoke by id (idempotent: a revoked token is returned unchanged); None if absent."""
        ...


def new_tenant(tenant_id: str, *, now: datetime, name: str | None = None) -> Tenant:
    """A tenant record with a fresh signing secret (`name` defaults to the id); store it with
    `TenantStore.ensure_tenant`."""
    return Tenant(
        id=tenant_id,
        name=tenant_id if name is None else name,
        signing_secret=new_signing_secret(),
        created_at=now,
    )


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def display_prefix(token: str) -> str:
    return token[: len(TOKEN_PREFIX) + DISPLAY_PREFIX_LENGTH]


def issue_token(
    store: TokenStore, tenant: str, *, now: datetime, label: str | None = None
) -> IssuedToken:
    """Create a token for `tenant`; the secret is returned once and never stored."""
    secret = new_token()
    info = store.add_token(
        token_id=new_id(),
        tenant=tenant,
        token_hash=hash_token(secret),
        prefix=display_prefix(secret),
        label=label,
        now=now,
    )
    return IssuedToken(info=info, secret=secret)


def authenticate(store: TokenStore, token: str) -> str | None:
    """The tenant a bearer token belongs to, or None (unknown or revoked)."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > TOKEN_MAX_LENGTH:
        return None
    return store.tenant_for_token_hash(hash_token(token))


__all__ = [
    "DISPLAY_PREFIX_LENGTH",
    "SIGNING_SECRET_BYTES",
    "TOKEN_BYTES",
    "TOKEN_MAX_LENGTH",
    "TOKEN_PREFIX",
    "IssuedToken",
    "Tenant",
    "TenantInfo",
    "TenantStore",
    "TokenInfo",
    "TokenStore",
    "authenticate",
    "display_prefix",
    "hash_token",
    "issue_token",
    "new_signing_secret",
    "new_tenant",
    "new_token",
]
