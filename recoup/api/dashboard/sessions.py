"""The dashboard's sessions and CSRF tokens: signed cookies, no session table.

A session cookie holds the tenant, the sha256 of the API token that signed in (never the token
itself: the hash cannot be turned back into it, and the tokens table stores only that hash),
who that token is (its label, else its prefix), a random nonce and an expiry, signed with HMAC-
SHA256 under the app's session key. Reading it checks the signature and the expiry; the caller
then checks, on every request, that the hash still belongs to an active token of that tenant
and that the session was not ended by a logout (its nonce in the `ended_sessions` table,
`recoup.api.dashboard.web`), so revoking the token ends its sessions at once, as it ends its
bearer access, and a logout ends the session itself, a copy of its cookie included.

CSRF tokens are bound to the session (an HMAC of its nonce), so a form posted from another
site, which cannot read the page, cannot carry one. The login form, which has no session yet,
uses a double-submit token: a random value in a cookie and the same value in the form.

The key lives in the process (random at start unless configured): a forged cookie needs it,
even with a copy of the database.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass

SESSION_COOKIE = "recoup_session"
LOGIN_COOKIE = "recoup_login_csrf"
# Over HTTPS the cookies' names carry the `__Host-` prefix (RFC 6265bis §4.1.3.2): a browser
# takes such a cookie only if it is Secure, for the path `/` and without a Domain, so neither a
# sibling subdomain nor a page over plain HTTP can plant or overwrite one.
HOST_PREFIX = "__Host-"
SESSION_SECONDS = 12 * 3600  # a session ends this long after sign-in, whatever happens
LOGIN_SECONDS = 3600  # a login form older than this must be loaded again
KEY_BYTES = 32
MAX_COOKIE_LENGTH = 1024  # longer cookie values are refused before decoding


@dataclass(frozen=True, kw_only=True)
class Session:
    """A signed-in browser: the tenant it acts for, the token hash it signed in with, and who
    that token is (its label, else its prefix: what the run log says did an action)."""

    tenant: str
    token_hash: str
    nonce: str
    expires: int  # Unix seconds
    who: str = ""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Sessions:
    """Issues and reads session cookies and the CSRF tokens bound to them.

    `wall` is the real time in Unix seconds (not the app's clock, which may be a test clock
    days ahead: a session's life is a matter of elapsed time)."""

    def __init__(self, key: bytes, *, wall: Callable[[], float]) -> None:
        if len(key) < 16:
            raise ValueError("a session key needs at least 16 bytes")
        self._key = key
        self._wall = wall

    def _sign(self, purpose: bytes, message: bytes) -> bytes:
        return hmac.new(self._key, purpose + b"\x00" + message, hashlib.sha256).digest()

    def issue(self, tenant: str, token_hash: str, *, who: str = "") -> tuple[str, Session]:
        """A new session and the cookie value that carries it."""
        session = Session(
            tenant=tenant,
            token_hash=token_hash,
            nonce=secrets.token_urlsafe(16),
            expires=int(self._wall()) + SESSION_SECONDS,
            who=who,
        )
        payload = json.dumps(
            {
                "t": session.tenant,
                "h": session.token_hash,
                "n": session.nonce,
                "e": session.expires,
                "w": session.who,
            },
            separators=(",", ":"),
        ).encode()
        return f"{_b64(payload)}.{_b64(self._sign(b'session', payload))}", session

    def read(self, cookie: str | None) -> Session | None:
        """The session a cookie carries; None when it is absent, altered, or expired."""
        if not cookie or len(cookie) > MAX_COOKIE_LENGTH or cookie.count(".") != 1:
            return None
        encoded, signature = cookie.split(".")
        try:
            payload, given = _unb64(encoded), _unb64(signature)
        except (binascii.Error, ValueError):
            return None
        if not hmac.compare_digest(given, self._sign(b"session", payload)):
            return None
        fields = json.loads(payload)  # signed by us: well-formed
        session = Session(
            tenant=fields["t"],
            token_hash=fields["h"],
            nonce=fields["n"],
            expires=fields["e"],
            who=fields.get("w", ""),
        )
        return session if self._wall() < session.expires else None

    def csrf_token(self, session: Session) -> str:
        """The token every form of this session carries."""
        return _b64(self._sign(b"csrf", session.nonce.encode()))

    def csrf_ok(self, session: Session, given: str | None) -> bool:
        expected = self.csrf_token(session).encode()
        return given is not None and hmac.compare_digest(given.encode(), expected)

    @staticmethod
    def login_token() -> str:
        """A fresh double-submit value for the login form and its cookie."""
        return secrets.token_urlsafe(24)

    @staticmethod
    def login_ok(cookie: str | None, given: str | None) -> bool:
        if not cookie or not given:
            return False
        return hmac.compare_digest(cookie.encode(), given.encode())


def cookie_name(base: str, *, https: bool) -> str:
    """The name of cookie `base` on a page served over HTTPS (`__Host-…`) or not."""
    return HOST_PREFIX + base if https else base


def new_session_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


__all__ = [
    "HOST_PREFIX",
    "LOGIN_COOKIE",
    "LOGIN_SECONDS",
    "SESSION_COOKIE",
    "SESSION_SECONDS",
    "Session",
    "Sessions",
    "cookie_name",
    "new_session_key",
]
