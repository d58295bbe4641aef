"""API tokens: bearer secrets scoped to one tenant, stored only as hashes.

A token is `rcp_` + 43 characters of URL-safe base64 (32 random bytes). Only its sha256 is
stored: a token has 256 bits of entropy, so a plain hash is as strong as a slow KDF here, and
a lookup by hash needs no constant-time comparison (the comparison happens on the digest, not
on the secret). The first characters after the prefix are kept in clear as the token's
`prefix`, so an operator can tell tokens apart in a list.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from recoup.jobs.model import new_id

# Signing secrets are made in `recoup.jobs.signing` (the embedded scheduler makes them too);
# re-exported here, where the CLI and the API tests have always found them.
from recoup.jobs.signing import SIGNING_SECRET_BYTES as SIGNING_SECRET_BYTES
from recoup.jobs.signing import new_signing_secret as new_signing_secret
from recoup.timekeeping.instants import require_aware

TOKEN_PREFIX = "rcp_"
TOKEN_BYTES = 32
DISPLAY_PREFIX_LENGTH = 8  # characters after `rcp_` kept in clear


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


class TokenStore(Protocol):
    """Stored API tokens. Implemented by each storage backend's `api_tables` module."""

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

    def list_tenants(self) -> list[TenantInfo]:
        """Every tenant, oldest first."""
        ...


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
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    return store.tenant_for_token_hash(hash_token(token))
