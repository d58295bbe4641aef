"""The SSRF guard: outbound HTTP targets must be public unless the operator says otherwise.

A target URL is refused when its scheme is not http/https, or when its host (an address
literal, or every address it resolves to) is loopback, private, link-local, multicast,
unspecified, reserved or otherwise not globally routable, IPv4 and IPv6 alike. Addresses that
embed an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, 6to4 `2002::/16`, Teredo, NAT64
`64:ff9b::/96`) are judged by the embedded address, so `::ffff:127.0.0.1` is loopback and
`64:ff9b::a00:1` (10.0.0.1 through a NAT64 gateway) is private. Ranges `ipaddress` counts as
global, or classifies differently from one Python version to the next, are listed explicitly
(`EXTRA_RULES`): IPv6 site-local `fec0::/10`, CGNAT `100.64.0.0/10`, the IETF protocol block
`192.0.0.0/24`, benchmarking `198.18.0.0/15`, local-use NAT64 `64:ff9b:1::/48`.

It is checked twice: when a job is created (`check_url`, so the caller hears at once) and when
the worker opens each connection (`resolve`, called by the HTTP client's resolver with the
host it is about to connect to, which then connects only to the addresses checked), so
a DNS answer that changes between the two ("DNS rebinding") cannot slip through, and neither
can a connection the pool opens later for the same host.

The guard reads no environment: the shell (CLI, worker start-up) builds it from
`RECOUP_ALLOW_PRIVATE_TARGETS` and the configured allow-list.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from recoup.errors import InvalidInput

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOWED_SCHEMES = ("http", "https")
ALLOW_PRIVATE_ENV = "RECOUP_ALLOW_PRIVATE_TARGETS"  # read by the shell, never by this module


# Non-public ranges checked explicitly, with the rule each breaks (see the module docstring).
EXTRA_RULES: tuple[tuple[IPNetwork, str], ...] = (
    (ipaddress.ip_network("fec0::/10"), "site-local"),  # RFC 3879: deprecated, still internal
    (ipaddress.ip_network("100.64.0.0/10"), "not-global"),  # RFC 6598 shared (CGNAT) space
    (ipaddress.ip_network("192.0.0.0/24"), "reserved"),  # RFC 6890 IETF protocol assignments
    (ipaddress.ip_network("198.18.0.0/15"), "reserved"),  # RFC 2544 benchmarking
    (ipaddress.ip_network("64:ff9b:1::/48"), "private"),  # RFC 8215 local-use NAT64
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix: v4 in the low 32 bits


class TargetRefused(InvalidInput):
    """A target the SSRF guard refuses. `rule` names the rule broken (`scheme`, `loopback`,
    `private`, `link-local`, `site-local`, `multicast`, `unspecified`, `reserved`,
    `not-global`, `host`)."""

    def __init__(self, value: object, rule: str, reason: str, *, field: str = "target.url"):
        self.rule = rule
        self.reason = reason
        super().__init__(field, value, f"refused by the SSRF guard ({rule}): {reason}")


def address_rule(ip: IPAddress) -> str | None:
    """The name of the first rule `ip` breaks, or None for a public address."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
        if embedded is not None:
            return address_rule(embedded)
    for network, rule in EXTRA_RULES:
        if ip.version == network.version and ip in network:
            return rule
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:  # shared address space (100.64/10), and the like
        return "not-global"
    return None


class SsrfGuard:
    """Refuses non-public targets unless `allow_private` is set or an address falls inside one
    of `allowed_cidrs` (e.g. `["10.1.0.0/16", "fd00::/8"]`)."""

    def __init__(
        self, *, allow_private: bool = False, allowed_cidrs: Iterable[str | IPNetwork] = ()
    ) -> None:
        self.allow_private = allow_private
        networks: list[IPNetwork] = []
        for cidr in allowed_cidrs:
            try:
                networks.append(ipaddress.ip_network(cidr, strict=False))
            except ValueError:
                raise InvalidInput(
                    "allowed_cidrs", str(cidr), "expected CIDR blocks such as '10.0.0.0/8'"
                ) from None
        self.allowed_cidrs: tuple[IPNetwork, ...] = tuple(networks)

    def __repr__(self) -> str:
        cidrs = [str(n) for n in self.allowed_cidrs]
        return f"SsrfGuard(allow_private={self.allow_private}, allowed_cidrs={cidrs})"

    def check_address(self, ip: IPAddress, *, url: str = "", host: str = "") -> None:
        """Raise `TargetRefused` if `ip` is not public and not allowed."""
        if self.allow_private:
            return
        rule = address_rule(ip)
        if rule is None or self._allowed(ip):
            return
        shown = f"{host} resolves to {ip}" if host and host != str(ip) else str(ip)
        raise TargetRefused(
            url or str(ip),
            rule,
            f"{shown}, a {rule} address; allow it with a CIDR allow-list or {ALLOW_PRIVATE_ENV}=1",
        )

    def _allowed(self, ip: IPAddress) -> bool:
        candidates: list[IPAddress] = [ip]
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            candidates.append(ip.ipv4_mapped)
        return any(
            c in net for c in candidates for net in self.allowed_cidrs if c.version == net.version
        )

    def check_url(self, url: str, *, resolve: bool = True) -> None:
        """The creation-time check: scheme http/https, a host, and (when it is an address
        literal, or `resolve` is set and it resolves now) only allowed addresses. A name that
        does not resolve now is accepted: the send-time check is the authoritative one."""
        host, port = self._split(url)
        literal = _literal(host)
        if literal is not None:
            self.check_address(literal, url=url, host=host)
            return
        if self.allow_private or not resolve:
            return
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return
        for ip in _addresses(infos):
            self.check_address(ip, url=url, host=host)

    def looks_up(self, url: str) -> bool:
        """Whether `check_url(url)` would ask DNS (a host name, not an address literal, and
        private targets not allowed): a caller on an event loop checks such a URL off it."""
        try:
            host, _ = self._split(url)
        except TargetRefused:
            return False  # refused before any look-up
        return _literal(host) is None and not self.allow_private

    async def resolve_host(self, host: str, port: int) -> str:
        """The address to connect to for `host`, after checking every address it resolves to
        (the connection-time check: what is checked is what is connected to). Raises
        `TargetRefused`, or `OSError` when the name does not resolve."""
        literal = _literal(host)
        if literal is not None:
            self.check_address(literal, host=host)
            return host
        if self.allow_private:
            return host
        return str((await self.resolve(host, port))[0])

    async def resolve(
        self, host: str, port: int, *, family: int = socket.AF_UNSPEC
    ) -> list[IPAddress]:
        """Every address `host` resolves to, each checked: the HTTP client's resolver
        (`targets.GuardedResolver`) connects to one of these and to nothing else. Raises
        `TargetRefused` if any is refused, `OSError` when the name does not resolve."""
        literal = _literal(host)
        if literal is not None:
            self.check_address(literal, host=host)
            return [literal]
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM)
        addresses = _addresses(infos)
        if not addresses:
            raise OSError(f"{host} did not resolve")
        for ip in addresses:
            self.check_address(ip, host=host)
        return addresses

    @staticmethod
    def _split(url: str) -> tuple[str, int]:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise TargetRefused(url, "host", f"not a valid URL ({exc})") from None
        if parts.scheme.lower() not in ALLOWED_SCHEMES:
            raise TargetRefused(url, "scheme", "expected an http:// or https:// URL")
        host = parts.hostname
        if not host:
            raise TargetRefused(url, "host", "the URL has no host")
        default = 443 if parts.scheme.lower() == "https" else 80
        return host, port or default


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return None


def _addresses(infos: Iterable[tuple[object, ...]]) -> list[IPAddress]:
    found: list[IPAddress] = []
    for info in infos:
        sockaddr = info[4]
        if isinstance(sockaddr, tuple) and sockaddr:
            ip = _literal(str(sockaddr[0]))
            if ip is not None and ip not in found:
                found.append(ip)
    return found


__all__ = [
    "ALLOWED_SCHEMES",
    "ALLOW_PRIVATE_ENV",
    "SsrfGuard",
    "TargetRefused",
    "address_rule",
]
