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

A tenant's life after creation (operators act through `recoup tenants …`; there is no HTTP
surface for it):

- **Disabled** (`disable_tenant`): its tokens are refused at once (the API answers 403
  `tenant_disabled`: the token is genuine, the tenant may not act), its schedules do not fire,
  and its jobs are **held**, not failed nor cancelled: they stay scheduled and nothing fires
  them (for money, a late charge after the operator re-enables is better than a lost or a
  wrong one). Attempts already running, or claimed in the worker's short horizon (half a
  second by default), finish; a dunning attempt claimed before the disable re-reads its tenant
  and does not charge. `enable_tenant` lets everything run again: held jobs whose time passed
  run at once, schedules follow their `missed` policy.
- **Deleted** (`delete_tenant`): the tenant and every row of it (jobs, runs, schedules, tokens,
  idempotency keys, dunning invoices, attempts, events and settings, merchant tags) go in one
  transaction;
  its tokens are then unknown (401). Only a disabled tenant with no attempt running may be
  deleted, so that no charge is in flight; `default`, the embedded tenant of the Python API,
  is neither disabled nor deleted.
- **Signing-secret rotation** (`rotate_signing_secret`): a new secret signs from now on; the
  one it replaces keeps signing beside it for an overlap (24 hours by default), so requests
  carry both signatures (`webhook-signature: v1,<new> v1,<old>`, as Standard Webhooks allows)
  and receivers switch to the new secret at their pace; after the overlap only the new one
  signs. Workers cache the keys for a minute (`SECRET_TTL`): the new signature appears within
  it. A secret is shown when it is made (creation, rotation) and never listed afterwards.

What a person holding a token does by hand from the dashboard (retry or cancel a job, stop an
invoice's dunning, mark it paid) is kept as an `OperatorAction`, naming the token (its label,
else its prefix), so a run log and an invoice's timeline say who did it.

`TenantStore`, `TokenStore` and `ActionLog` are implemented by every storage backend
(`recoup.storage`).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from recoup.errors import InvalidInput
from recoup.jobs.model import DEFAULT_TENANT, Tenant, new_id
from recoup.jobs.signing import SIGNING_SECRET_BYTES, new_signing_secret
from recoup.timekeeping.instants import require_aware

TOKEN_PREFIX = "rcp_"
TOKEN_BYTES = 32  # random bytes in a token's secret
DISPLAY_PREFIX_LENGTH = 8  # characters after `rcp_` kept in clear
TOKEN_MAX_LENGTH = 200  # longer bearer values are refused before hashing
SECRET_DISPLAY_LENGTH = 4  # characters after `whsec_` an operator's listing shows (the
# `list_tenants` queries cut the same 10 characters, so the secret never leaves whole)
DEFAULT_OVERLAP = timedelta(hours=24)  # how long a replaced signing secret still signs
MAX_OVERLAP = timedelta(days=30)


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
    """A tenant as an operator lists it (its signing secrets left out)."""

    id: str
    name: str
    created_at: datetime
    disabled_at: datetime | None = None
    rotating_until: datetime | None = None  # while a replaced signing secret still signs
    secret_prefix: str = ""  # the signing secret's first characters (`secret_display`)


@dataclass(frozen=True, kw_only=True)
class TokenOwner:
    """Whom an active token acts for, and whether that tenant may act now."""

    tenant: str
    disabled: bool
    # The store's `token_epoch` as this was read (in the same statement): true while it holds.
    # Not part of the owner's identity: the same owner read twice is equal.
    epoch: int = field(default=0, compare=False)


class ActionSubject(StrEnum):
    """What an operator's action was taken on."""

    JOB = "job"
    INVOICE = "invoice"


@dataclass(frozen=True, kw_only=True)
class OperatorAction:
    """Something a person holding one of the tenant's tokens did by hand (from the dashboard):
    retried or cancelled a job, stopped an invoice's dunning, marked it paid. `who` names the
    token that signed in (its label, else its prefix: never the secret); `detail` says the
    rest in words (a stop's reason, the bulk action it was part of)."""

    tenant: str
    subject: ActionSubject
    subject_id: str
    action: str  # "retry", "cancel", "stop", "paid"
    who: str
    at: datetime
    detail: str = ""

    def __post_init__(self) -> None:
        require_aware("at", self.at)


class ActionLog(Protocol):
    """The operators' actions, kept beside the API's tokens (`recoup.storage.ApiTables`)."""

    def record_action(self, action: OperatorAction) -> None: ...

    def actions_on(
        self, tenant: str, subject: ActionSubject, subject_id: str
    ) -> list[OperatorAction]:
        """The actions taken on one job or invoice of `tenant`, oldest first."""
        ...


@dataclass(frozen=True, kw_only=True)
class IssuedToken:
    """A token just created: the only time its secret is known."""

    info: TokenInfo
    secret: str = field(repr=False)


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

    def set_tenant_disabled(
        self, tenant_id: str, *, disabled: bool, now: datetime
    ) -> Tenant | None:
        """Disable the tenant and hold its scheduled jobs, or enable it and release them, in
        one transaction (idempotent: disabling twice keeps the first instant). None if absent."""
        ...

    def replace_signing_secret(
        self, tenant_id: str, *, secret: str, previous_until: datetime | None
    ) -> Tenant | None:
        """Make `secret` the tenant's signing secret; the one it replaces keeps signing until
        `previous_until` (None: not at all). None if absent."""
        ...

    def delete_tenant(self, tenant_id: str) -> dict[str, int] | None:
        """Delete the tenant and every row of it in one transaction; the rows deleted, by
        table. None if absent; `Conflict` (nothing deleted) unless it is disabled and none of
        its jobs is running."""
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

    def token_owner(self, token_hash: str) -> TokenOwner | None:
        """The owner of an active (not revoked) token with that hash, read afresh."""
        ...

    def token_epoch(self) -> int:
        """A counter that every change able to refuse a token bumps (a token revoked or
        deleted, a tenant disabled, enabled or deleted), in whichever process it is made: an
        owner read while it had a value stays true while it keeps it (what lets the API
        cache owners, `recoup.api.token_cache`)."""
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


def token_name(tokens: Iterable[TokenInfo], token: str) -> str:
    """What the run log calls the person acting with `token`: the token's label (set by
    `recoup tokens create TENANT --label …`), else its prefix, which `recoup tokens list`
    shows; never the secret."""
    prefix = display_prefix(token)
    for info in tokens:
        if info.active and info.prefix == prefix and info.label:
            return f"{info.label} ({prefix}…)"
    return f"token {prefix}…"


def identify(store: TokenStore, token: str) -> TokenOwner | None:
    """The owner of a bearer token, or None (unknown, malformed or revoked)."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > TOKEN_MAX_LENGTH:
        return None
    return store.token_owner(hash_token(token))


def authenticate(store: TokenStore, token: str) -> str | None:
    """The tenant a bearer token may act for, or None (unknown, revoked, or its tenant
    disabled)."""
    owner = identify(store, token)
    return None if owner is None or owner.disabled else owner.tenant


def secret_display(secret: str) -> str:
    """What an operator's listing shows of a signing secret: enough to tell two apart."""
    return secret[: len("whsec_") + SECRET_DISPLAY_LENGTH]


def refuse_default(tenant_id: str, verb: str) -> None:
    """`InvalidInput` if `tenant_id` is `default`, which cannot be `verb` (disabled, deleted)."""
    if tenant_id == DEFAULT_TENANT:
        raise InvalidInput(
            "NAME",
            tenant_id,
            f"{DEFAULT_TENANT!r} is the embedded tenant of the Python API and cannot be "
            f"{verb}; revoke its tokens instead (`recoup tokens revoke`)",
        )


def disable_tenant(store: TenantStore, tenant_id: str, *, now: datetime) -> Tenant | None:
    """Refuse the tenant's tokens, hold its jobs, stop its schedules (see the module's
    docstring). None if there is no such tenant."""
    refuse_default(tenant_id, "disabled")
    return store.set_tenant_disabled(tenant_id, disabled=True, now=now)


def enable_tenant(store: TenantStore, tenant_id: str, *, now: datetime) -> Tenant | None:
    """Undo `disable_tenant`: its tokens work again and its held jobs run."""
    return store.set_tenant_disabled(tenant_id, disabled=False, now=now)


def delete_tenant(store: TenantStore, tenant_id: str) -> dict[str, int] | None:
    """Delete a disabled tenant with no attempt running, and all its rows (see
    `TenantStore.delete_tenant`)."""
    refuse_default(tenant_id, "deleted")
    return store.delete_tenant(tenant_id)


def check_overlap(overlap: timedelta) -> timedelta:
    if not timedelta(0) <= overlap <= MAX_OVERLAP:
        raise InvalidInput("overlap", overlap, "expected 0 to 30 days")
    return overlap


def rotate_signing_secret(
    store: TenantStore,
    tenant_id: str,
    *,
    now: datetime,
    overlap: timedelta = DEFAULT_OVERLAP,
) -> Tenant | None:
    """Give the tenant a new signing secret; the current one keeps signing beside it for
    `overlap` (0: replaced at once). Returns the tenant with its new secret (the only time it
    is known outside the store), or None if there is no such tenant."""
    check_overlap(overlap)
    require_aware("now", now)
    return store.replace_signing_secret(
        tenant_id,
        secret=new_signing_secret(),
        previous_until=now + overlap if overlap > timedelta(0) else None,
    )


__all__ = [
    "DEFAULT_OVERLAP",
    "DISPLAY_PREFIX_LENGTH",
    "MAX_OVERLAP",
    "SECRET_DISPLAY_LENGTH",
    "SIGNING_SECRET_BYTES",
    "TOKEN_BYTES",
    "TOKEN_MAX_LENGTH",
    "TOKEN_PREFIX",
    "ActionLog",
    "ActionSubject",
    "IssuedToken",
    "OperatorAction",
    "Tenant",
    "TenantInfo",
    "TenantStore",
    "TokenInfo",
    "TokenOwner",
    "TokenStore",
    "authenticate",
    "check_overlap",
    "delete_tenant",
    "disable_tenant",
    "display_prefix",
    "enable_tenant",
    "hash_token",
    "identify",
    "issue_token",
    "new_signing_secret",
    "new_tenant",
    "new_token",
    "refuse_default",
    "rotate_signing_secret",
    "secret_display",
    "token_name",
]
