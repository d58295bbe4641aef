"""The owners of the bearer tokens an API process has seen, kept in memory, so that a request
on a hot path needs no read of its token and tenant: only the store's `token_epoch`, a counter
every change able to refuse a token bumps (migration 0018's triggers: a token revoked or
deleted, a tenant disabled, enabled or deleted, by any process or tool), read in the request's
own transaction.

An owner is cached with the epoch read *before* it (`identify`), so a cached owner is never
newer than its epoch says. A request whose transaction reads another epoch than its owner's
(`StaleToken`) is undone and answered the slow way, with the token read afresh: a revocation
committed before a request began is seen by that request (every statement sees the commits
made before it), so the first request after it is refused, on every process at once. Only
owners allowed to act are cached: an unknown, revoked or disabled token is read every time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from recoup.errors import RecoupError
from recoup.tenancy import TOKEN_MAX_LENGTH, TOKEN_PREFIX, TokenStore, hash_token

MAX_CACHED = 10_000  # tokens remembered per process; past it the cache starts over
BEARER = "Bearer "


@dataclass(frozen=True, slots=True)
class CachedOwner:
    """An active token's tenant, true while the store's epoch is still `epoch`."""

    tenant: str
    epoch: int


class StaleToken(RecoupError):
    """The store's epoch moved since the token's owner was read: read it again."""


class TokenCache:
    """Owners of active tokens by token hash, each with the epoch it was read under."""

    def __init__(self, tokens: TokenStore, *, max_cached: int = MAX_CACHED) -> None:
        self._tokens = tokens
        self._max = max_cached
        self._owners: dict[str, CachedOwner] = {}
        self._lock = threading.Lock()  # `remember` runs in the thread pool's threads

    def cached(self, authorization: str | None) -> CachedOwner | None:
        """The cached owner of `Authorization: Bearer <token>` (no I/O); None when the header
        is not exactly that or the token is not cached (the caller asks the slow way)."""
        if authorization is None or not authorization.startswith(BEARER):
            return None
        token = authorization[len(BEARER) :]
        if not token.startswith(TOKEN_PREFIX) or len(token) > TOKEN_MAX_LENGTH:
            return None
        return self._owners.get(hash_token(token))

    def remember(self, token: str, tenant: str, epoch: int) -> None:
        with self._lock:
            if len(self._owners) >= self._max:
                self._owners.clear()
            self._owners[hash_token(token)] = CachedOwner(tenant, epoch)

    def forget(self, token: str) -> None:
        with self._lock:
            self._owners.pop(hash_token(token), None)

    def check(self, owner: CachedOwner) -> None:
        """`StaleToken` unless the store's epoch is still the owner's (a statement of the
        caller's transaction when called inside one)."""
        if self._tokens.token_epoch() != owner.epoch:
            raise StaleToken("the tokens or tenants changed since this token was read")


__all__ = ["BEARER", "MAX_CACHED", "CachedOwner", "StaleToken", "TokenCache"]
