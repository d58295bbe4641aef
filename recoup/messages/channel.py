"""Sending one email: the `EmailChannel` protocol, and `SmtpChannel`, over `aiosmtplib`
(imported where it is used, so the core install needs none of it).

An SMTP URL names the server and how to reach it:

    smtp://[user:password@]host[:port][?starttls=auto|require|never]   (port 587 by default;
        STARTTLS when the server offers it, `require`: refuse a server that does not)
    smtps://[user:password@]host[:port]                                 (implicit TLS, 465)

User and password are percent-decoded. A send ends in a `Delivery` value or raises one of two
errors, so that the caller can tell a try to repeat from an address to give up on:

| what happened                                                | raised              |
|--------------------------------------------------------------|---------------------|
| the server accepted the message (2xx to DATA)                | nothing: `Delivery` |
| a 5xx to RCPT: the server refuses the recipient              | `RecipientRefused`  |
| connection refused or lost, timeout, TLS or login failure,   | `SendFailed`        |
| any 4xx, a 5xx to MAIL or DATA (a problem of the sender)     |                     |

Only a refused recipient is permanent: it says the address will not take mail, which is what a
bounce is. Everything else is retried (a job's backoff): a wrong password or a server down is
fixed by the tenant, not by the customer.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from recoup.errors import InvalidInput, RecoupError
from recoup.messages.mime import Composed

StartTls = Literal["auto", "require", "never"]
SMTP_SCHEMES = ("smtp", "smtps")
DEFAULT_PORTS = {"smtp": 587, "smtps": 465}
SMTP_TIMEOUT = 30.0  # seconds: for the connection and for each command
_ALLOWED = (
    "expected smtp://[user:password@]host[:port][?starttls=auto|require|never] or "
    "smtps://[user:password@]host[:port]"
)


class SendFailed(RecoupError):
    """The message was not accepted this time (the server, the network, the login): retry."""


class RecipientRefused(RecoupError):
    """The server refused the recipient for good (a 5xx to RCPT): a bounce."""

    def __init__(self, recipient: str, reply: str) -> None:
        super().__init__(f"{recipient} refused: {reply}")
        self.recipient = recipient
        self.reply = reply


@dataclass(frozen=True)
class SmtpServer:
    """An SMTP URL, read."""

    scheme: Literal["smtp", "smtps"]
    host: str
    port: int
    username: str | None
    password: str | None
    starttls: StartTls

    def __repr__(self) -> str:
        return f"SmtpServer({self.redacted()!r})"

    def redacted(self) -> str:
        """The URL without its password (for messages and logs)."""
        user = f"{self.username}:…@" if self.username else ""
        tls = (
            ""
            if self.scheme == "smtps" or self.starttls == "auto"
            else f"?starttls={self.starttls}"
        )
        return f"{self.scheme}://{user}{self.host}:{self.port}{tls}"


def redact_smtp_url(url: str) -> str:
    """`url` with any password replaced (what an error may show of it), however malformed:
    whatever stands between the user's name and the last `@` is the password's."""
    head, at, tail = url.rpartition("@")
    if not at:
        return url
    scheme, sep, userinfo = head.partition("://")
    if not sep:
        scheme, userinfo = "", head
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}{sep}{user}:…@{tail}" if colon else url


def parse_smtp_url(url: str, field: str = "smtp_url") -> SmtpServer:
    """The server of an SMTP URL; `InvalidInput(field, …)` (never showing the password) for
    anything else."""
    if not url.isprintable() or " " in url:
        raise InvalidInput(field, "(not shown)", _ALLOWED)
    shown = redact_smtp_url(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidInput(field, shown, _ALLOWED) from None
    if parts.scheme not in SMTP_SCHEMES or not parts.hostname or parts.path not in ("", "/"):
        raise InvalidInput(field, shown, _ALLOWED)
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = set(query) - {"starttls"}
    starttls = query.get("starttls", ["auto"])[-1]
    if unknown or starttls not in ("auto", "require", "never") or parts.fragment:
        raise InvalidInput(field, shown, _ALLOWED)
    if parts.scheme == "smtps" and "starttls" in query:
        raise InvalidInput(field, shown, "expected no starttls with smtps (TLS from the start)")
    scheme: Literal["smtp", "smtps"] = "smtps" if parts.scheme == "smtps" else "smtp"
    return SmtpServer(
        scheme=scheme,
        host=parts.hostname,
        port=port or DEFAULT_PORTS[scheme],
        username=None if parts.username is None else unquote(parts.username),
        password=None if parts.password is None else unquote(parts.password),
        starttls=starttls,  # type: ignore[arg-type]  # checked just above
    )


@dataclass(frozen=True)
class Delivery:
    """The server accepted the message: its reply (for the ledger and the run log)."""

    reply: str


class EmailChannel(Protocol):
    async def send(self, message: Composed) -> Delivery:
        """Hand `message` (its bytes and envelope, `messages.mime`) to the server; `Delivery`
        when it was accepted, else `SendFailed` or `RecipientRefused` (the module's table)."""
        ...


class SmtpChannel:
    """Messages to `server`, over connections kept open between them: a send takes an idle
    connection of the running event loop (checked with a NOOP first when it waited longer than
    `check_after` seconds, so one the server closed meanwhile is replaced before anything is
    sent on it; one given back a moment ago goes straight to MAIL) or opens one, and gives it
    back when the server accepted the message; any failure closes it. At most `keep` stay
    idle, each for at most `idle_for` seconds (servers close idle connections after a minute
    or more). A burst of emails (the demo's month, a renewal day) then costs the message's
    own round trips instead of a connection, a greeting, a login and a goodbye."""

    def __init__(
        self,
        server: SmtpServer,
        *,
        timeout: float = SMTP_TIMEOUT,
        tls_context: ssl.SSLContext | None = None,
        keep: int = 16,
        idle_for: float = 30.0,
        check_after: float = 2.0,
    ) -> None:
        self.server = server
        self.timeout = timeout
        self.tls_context = tls_context
        self.keep = keep
        self.idle_for = idle_for
        self.check_after = check_after
        self._idle: list[_Idle] = []
        self._local_hostname: str | None = None  # what EHLO says: looked up once

    def __repr__(self) -> str:
        return f"SmtpChannel({self.server.redacted()!r})"

    async def send(self, message: Composed) -> Delivery:
        import aiosmtplib

        server = self.server
        recipient = message.recipient
        client = None
        try:
            client = await self._connection()
            # The bytes as composed: no second flattening of a message object on the loop.
            _, reply = await client.sendmail(message.sender, [recipient], message.data)
        except aiosmtplib.SMTPRecipientsRefused as exc:
            await _close(client)
            refused = exc.recipients[0] if exc.recipients else None
            code = refused.code if refused is not None else 0
            said = f"{code} {refused.message}" if refused is not None else str(exc)
            if 500 <= code < 600:
                raise RecipientRefused(recipient, said) from None
            raise SendFailed(f"recipient deferred by {server.redacted()}: {said}") from None
        except aiosmtplib.SMTPResponseException as exc:
            await _close(client)
            raise SendFailed(f"{server.redacted()} answered {exc.code} {exc.message}") from None
        except (aiosmtplib.SMTPException, OSError) as exc:
            await _close(client)
            raise SendFailed(f"{server.redacted()}: {type(exc).__name__}: {exc}") from None
        except BaseException:
            await _close(client)
            raise
        self._give_back(client)
        return Delivery(reply=reply.strip()[:500])

    async def _connection(self) -> Any:
        """An idle connection of this loop (that answers a NOOP, if it waited long enough for
        a server to drop it), else a new one. A server that drops one sooner fails the MAIL:
        the send fails, and the job's next try opens a new connection."""
        import aiosmtplib

        loop = asyncio.get_running_loop()
        while self._idle:
            idle = self._idle.pop()
            client = idle.take()
            if client is None or idle.loop is not loop:
                continue
            if loop.time() - idle.since < self.check_after and client.is_connected:
                return client
            try:
                await client.noop()
            except (aiosmtplib.SMTPException, OSError):
                await _close(client)
                continue
            return client
        server = self.server
        start_tls = {"auto": None, "require": True, "never": False}[server.starttls]
        if self._local_hostname is None:  # aiosmtplib would ask for it at every connection
            self._local_hostname = await asyncio.to_thread(socket.getfqdn)
        client = aiosmtplib.SMTP(
            local_hostname=self._local_hostname,
            hostname=server.host,
            port=server.port,
            username=server.username,
            password=server.password,
            use_tls=server.scheme == "smtps",
            start_tls=None if server.scheme == "smtps" else start_tls,
            timeout=self.timeout,
            tls_context=self.tls_context,
        )
        await client.connect()
        return client

    def _give_back(self, client: Any) -> None:
        self._idle = [idle for idle in self._idle if idle.client is not None]
        if len(self._idle) < self.keep and client.is_connected:
            self._idle.append(_Idle(client, self.idle_for))
        else:
            client.close()


class _Idle:
    """A connection waiting for the next message, closed by a task of its loop when nobody
    takes it within `idle_for` seconds, or when the loop ends (asyncio.run cancels the task
    and its `finally` closes the connection: nothing is left open behind a worker)."""

    def __init__(self, client: Any, idle_for: float) -> None:
        self.client: Any = client
        self.loop = asyncio.get_running_loop()
        self.since = self.loop.time()
        self._task = self.loop.create_task(self._linger(idle_for))

    def take(self) -> Any:
        client, self.client = self.client, None
        self._task.cancel()
        return client

    async def _linger(self, idle_for: float) -> None:
        try:
            await asyncio.sleep(idle_for)
        finally:
            if self.client is not None:
                client, self.client = self.client, None
                await _close(client)


async def _close(client: Any) -> None:
    """Drop a connection without waiting on the server (a QUIT may hang on a broken one)."""
    if client is None:
        return
    try:
        client.close()
    except RuntimeError:  # its event loop has ended, and its transport with it
        pass


__all__ = [
    "DEFAULT_PORTS",
    "SMTP_SCHEMES",
    "Delivery",
    "EmailChannel",
    "RecipientRefused",
    "SendFailed",
    "SmtpChannel",
    "SmtpServer",
    "parse_smtp_url",
    "redact_smtp_url",
]
