"""The SSRF guard: non-public targets are refused unless allowed."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from recoup.errors import InvalidInput
from recoup.jobs.ssrf import SsrfGuard, TargetRefused, address_rule


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("http://127.0.0.1/x", "loopback"),
        ("http://127.8.9.10:8080/x", "loopback"),
        ("http://10.1.2.3/", "private"),
        ("http://172.16.0.1/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),  # cloud metadata
        ("http://0.0.0.0/", "unspecified"),
        ("http://224.0.0.1/", "multicast"),
        ("http://100.64.0.1/", "not-global"),  # shared address space (CGNAT)
        ("http://240.0.0.1/", "reserved"),
        ("http://[::1]/", "loopback"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),  # IPv4-mapped IPv6
        ("http://[::ffff:10.0.0.1]/", "private"),
        ("http://[fe80::1]/", "link-local"),
        ("http://[fc00::1]/", "private"),  # unique local
        ("http://[fec0::1]/", "site-local"),  # deprecated site-local
        ("http://[64:ff9b::a9fe:a9fe]/", "link-local"),  # NAT64 of the metadata address
        ("http://198.18.0.1/", "reserved"),  # benchmarking
        ("http://[ff02::1]/", "multicast"),
        ("http://[2002:7f00:1::]/", "loopback"),  # 6to4 wrapping 127.0.0.1
        ("ftp://example.com/", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("http:///nohost", "host"),
    ],
)
def test_non_public_targets_are_refused_naming_the_rule(url: str, rule: str) -> None:
    with pytest.raises(TargetRefused) as caught:
        SsrfGuard().check_url(url, resolve=False)
    assert caught.value.rule == rule
    assert isinstance(caught.value, InvalidInput)
    assert caught.value.field == "target.url"
    assert rule in str(caught.value)


def test_public_literals_pass() -> None:
    guard = SsrfGuard()
    guard.check_url("https://93.184.216.34/hook", resolve=False)
    guard.check_url("https://[2606:4700::1111]/hook", resolve=False)


def test_allow_private_lets_everything_through() -> None:
    guard = SsrfGuard(allow_private=True)
    guard.check_url("http://127.0.0.1:9/x")
    guard.check_url("http://[::1]/x")


def test_a_cidr_allow_list_admits_only_its_blocks() -> None:
    guard = SsrfGuard(allowed_cidrs=["10.1.0.0/16", "127.0.0.1/32"])
    guard.check_url("http://10.1.200.3/", resolve=False)
    guard.check_url("http://127.0.0.1:8000/", resolve=False)
    guard.check_url("http://[::ffff:127.0.0.1]/", resolve=False)  # the mapped form too
    with pytest.raises(TargetRefused):
        guard.check_url("http://10.2.0.1/", resolve=False)
    with pytest.raises(TargetRefused):
        guard.check_url("http://127.0.0.2/", resolve=False)
    with pytest.raises(TargetRefused):
        guard.check_url("http://169.254.169.254/", resolve=False)


def test_a_bad_cidr_is_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        SsrfGuard(allowed_cidrs=["not-a-network"])


def test_names_are_judged_by_what_they_resolve_to() -> None:
    with pytest.raises(TargetRefused) as caught:
        SsrfGuard().check_url("http://localhost:8080/hook")
    assert caught.value.rule == "loopback"
    assert "localhost resolves to" in str(caught.value)


def test_an_unresolvable_name_is_accepted_at_creation() -> None:
    SsrfGuard().check_url("https://no-such-host.invalid/hook")


def test_at_connection_time_the_checked_address_is_returned_to_connect_to() -> None:
    guard = SsrfGuard(allowed_cidrs=["127.0.0.0/8", "::1/128"])
    address = asyncio.run(guard.resolve_host("localhost", 1234))
    assert ipaddress.ip_address(address).is_loopback


def test_at_connection_time_a_name_resolving_to_a_private_address_is_refused() -> None:
    with pytest.raises(TargetRefused) as caught:
        asyncio.run(SsrfGuard().resolve_host("localhost", 1234))
    assert caught.value.rule == "loopback"
    with pytest.raises(TargetRefused):
        asyncio.run(SsrfGuard().resolve_host("10.0.0.7", 80))


@pytest.mark.parametrize(
    ("address", "rule"),
    [
        ("8.8.8.8", None),
        ("2001:4860:4860::8888", None),
        ("192.0.2.1", "private"),
        ("fec0::1", "site-local"),  # deprecated IPv6 site-local, which `ipaddress` calls global
        ("feff:ffff::1", "site-local"),  # the top of fec0::/10
        ("100.64.0.1", "not-global"),  # CGNAT
        ("100.127.255.254", "not-global"),
        ("192.0.0.1", "reserved"),  # IETF protocol assignments
        ("192.0.0.9", "reserved"),  # … including the anycast ones `ipaddress` calls global
        ("198.18.0.1", "reserved"),  # benchmarking
        ("198.19.255.254", "reserved"),
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of the cloud metadata address
        ("64:ff9b::808:808", None),  # NAT64 of 8.8.8.8: public
        ("64:ff9b:1::a00:1", "private"),  # local-use NAT64
        ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
        ("2002:c0a8:101::1", "private"),  # 6to4 of 192.168.1.1
        ("2002:808:808::1", None),  # 6to4 of 8.8.8.8: public
    ],
)
def test_address_rules(address: str, rule: str | None) -> None:
    assert address_rule(ipaddress.ip_address(address)) == rule


@pytest.mark.parametrize(
    ("url", "guard", "looks_up"),
    [
        ("https://api.example.com/hook", SsrfGuard(), True),  # a name: resolved at creation
        ("https://93.184.216.34/hook", SsrfGuard(), False),  # a literal: judged as it is
        ("http://[::1]/hook", SsrfGuard(), False),
        ("https://api.example.com/hook", SsrfGuard(allow_private=True), False),  # all allowed
        ("ftp://example.com/", SsrfGuard(), False),  # refused before any look-up
    ],
)
def test_it_says_which_urls_its_check_would_look_up(
    url: str, guard: SsrfGuard, looks_up: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    def getaddrinfo(host: str, *args: object, **kwargs: object) -> list[object]:
        asked.append(host)
        return []

    monkeypatch.setattr("recoup.jobs.ssrf.socket.getaddrinfo", getaddrinfo)
    assert guard.looks_up(url) is looks_up
    try:
        guard.check_url(url)
    except TargetRefused:
        pass
    assert bool(asked) is looks_up
