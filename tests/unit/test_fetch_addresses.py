"""Which addresses ``fetch`` may connect to, as a table: every denied range (IPv4, IPv6, and the IPv6
forms that carry an IPv4 address), and public addresses that pass. And how a url is normalised
before the allow-list compares it."""

from __future__ import annotations

import ipaddress

import pytest

from engine.errors import ToolError
from engine.tools.fetch import FetchSettings, address_allowed, make_get, normalise

DENIED = [
    # IPv4
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("10.0.0.1", "private"),
    ("10.255.255.255", "private"),
    ("100.64.0.1", "shared"),
    ("100.127.255.254", "shared"),
    ("100.100.100.200", "metadata"),
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("169.254.0.1", "link-local"),
    ("169.254.169.254", "metadata"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.0.0.8", "reserved protocol"),
    ("192.0.2.1", "documentation"),
    ("192.88.99.1", "6to4 relay"),
    ("192.168.0.1", "private"),
    ("192.168.255.255", "private"),
    ("198.18.0.1", "benchmarking"),
    ("198.51.100.1", "documentation"),
    ("203.0.113.1", "documentation"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    # IPv6
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("fe80::1", "link-local"),
    ("febf::1", "link-local"),
    ("fec0::1", "site-local"),
    ("fc00::1", "unique-local"),
    ("fd12:3456::1", "unique-local"),
    ("fd00:ec2::254", "metadata"),
    ("ff02::1", "multicast"),
    ("ff0e::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("100::1", "discard"),
    ("::127.0.0.1", "IPv4-compatible"),
    ("::8.8.8.8", "IPv4-compatible"),
    # IPv4-mapped: judged by the IPv4 address inside
    ("::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1, 127.0.0.1 is a loopback"),
    ("::ffff:10.0.0.1", "IPv4-mapped form of 10.0.0.1"),
    ("::ffff:169.254.169.254", "metadata"),
    ("::ffff:100.64.0.1", "shared"),
    ("::ffff:0.0.0.0", "unspecified"),
    ("::ffff:7f00:1", "loopback"),
    # IPv4-translated (SIIT, ::ffff:0:a.b.c.d): `ipaddress` does not unwrap it; it is unwrapped here
    ("::ffff:0:7f00:1", "IPv4-translated form of 127.0.0.1, 127.0.0.1 is a loopback"),
    ("::ffff:0:a9fe:a9fe", "metadata"),
    ("::ffff:0:808:808", "an IPv4-translated address (of 8.8.8.8)"),
    # Outside 2000::/3, where no public address has been handed out, whatever `is_global` says
    ("::ffff:1:808:808", "global unicast range"),
    ("4000::1", "global unicast range"),
    ("1::1", "global unicast range"),
    # 6to4: the IPv4 address inside, and refused even when that is public
    ("2002:7f00:0001::", "6to4 form of 127.0.0.1"),
    ("2002:0a00:0001::1", "6to4 form of 10.0.0.1"),
    ("2002:a9fe:a9fe::", "metadata"),
    ("2002:0808:0808::1", "6to4 address (of 8.8.8.8)"),
    # Teredo: the client address is stored inverted
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo form of 127.0.0.1"),
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo form of 10.0.0.1"),
    ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", "Teredo address (of 8.8.8.8)"),
    # NAT64
    ("64:ff9b::7f00:1", "NAT64 form of 127.0.0.1"),
    ("64:ff9b::a9fe:a9fe", "metadata"),
    ("64:ff9b::808:808", "NAT64 address (of 8.8.8.8)"),
    # Even a mapped public address: SPEC refuses the wrapped forms; ask for the plain one.
    ("::ffff:8.8.8.8", "IPv4-mapped address (of 8.8.8.8)"),
    ("64:ff9b:1::808:808", "NAT64"),
    # with a zone
    ("fe80::1%eth0", "link-local"),
    # not an address at all
    ("localhost", "not an IP address"),
    ("2130706433", "not an IP address"),
]

ALLOWED = [
    "1.1.1.1",
    "8.8.8.8",
    "93.184.215.14",
    "100.63.255.255",  # just below the shared space
    "100.128.0.0",  # just above it
    "172.15.255.255",
    "172.32.0.0",
    "192.167.255.255",
    "223.255.255.255",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001:80b::200e",
]


@pytest.mark.parametrize(("ip", "why"), DENIED, ids=[ip for ip, _ in DENIED])
def test_denied(ip: str, why: str) -> None:
    said = address_allowed(ip)
    assert said is not None, f"{ip} was allowed"
    assert why in said


@pytest.mark.parametrize("ip", ALLOWED)
def test_allowed(ip: str) -> None:
    assert address_allowed(ip) is None
    assert address_allowed(ipaddress.ip_address(ip)) is None


def test_every_denied_range_is_in_the_table() -> None:
    from engine.tools.addresses import DENIED as RANGES

    for network, _ in RANGES:
        inside = [ip for ip, _ in DENIED if "%" not in ip and _parses(ip) and ipaddress.ip_address(ip) in network]
        assert inside, f"{network} has no row in this table"


def _parses(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


NORMALISED = [
    ("https://Example.ORG:443/docs/a?b=1#frag", "https://example.org/docs/a?b=1"),
    ("https://example.org./x", "https://example.org/x"),
    ("https://example.org/docs/../admin", "https://example.org/admin"),
    ("https://bücher.de/x", "https://xn--bcher-kva.de/x"),
    ("https://[::1]:8443/x", "https://[::1]:8443/x"),
    ("https://exa\tmple.org/", "https://example.org/"),
]


@pytest.mark.parametrize(("raw", "expected"), NORMALISED)
def test_normalise(raw: str, expected: str) -> None:
    assert str(normalise(raw)) == expected


REFUSED_URLS = [
    ("http://2130706433/", "four decimal numbers"),
    ("http://0x7f.1/", "four decimal numbers"),
    ("http://0x7f000001/", "four decimal numbers"),
    ("http://0177.0.0.1/", "four decimal numbers"),
    ("http://127.1/", "four decimal numbers"),
    ("https://127.000.000.001/", "four decimal numbers"),
    ("https://user@example.org/", "user name or password"),
    ("https://example.org@evil.test/", "user name or password"),
    ("https://a:b@example.org/", "user name or password"),
    ("ftp://example.org/", "only https"),
    ("file:///etc/passwd", "only https"),
    ("javascript:alert(1)", "only https"),
    ("gopher://127.0.0.1:6379/", "only https"),
    ("https:///x", "names no host"),
    ("https://[fe80::1%25eth0]/", "zone"),
    ("https://example.org/docs%2f..%2fadmin", "encoded slash"),
    ("https://example.org/docs%5C..%5Cadmin", "encoded slash"),
    # What a server may read as another path than the one compared with the allow-list
    ("https://example.org/docs/..;/admin", "a ; in its path"),
    ("https://example.org/docs;x/page", "a ; in its path"),
    ("https://example.org/docs/%2e%2e/admin", "an encoded dot"),
    ("https://example.org/docs/.%2E/admin", "an encoded dot"),
    ("https://example.org/docs/%2ehidden", "an encoded dot"),
    ("https://example.org/docs/%252e%252e/admin", "an encoded %"),
    ("https://example.org/docs/%25", "an encoded %"),
    ("https://example.org/docs/..%00/admin", "an encoded control character"),
]


@pytest.mark.parametrize(("raw", "why"), REFUSED_URLS)
def test_refused_urls(raw: str, why: str) -> None:
    with pytest.raises(ToolError, match=why):
        normalise(raw)


@pytest.mark.parametrize("entry", ["example.org/docs", "https://user@example.org/", "https://example.org/?q=1",
                                   "ftp://example.org/"])
def test_a_bad_allow_list_entry_is_refused_at_once(entry: str) -> None:
    with pytest.raises(ValueError, match="fetch allow-list"):
        make_get(FetchSettings(allow=(entry,)))


@pytest.mark.parametrize("url", ["https://example.org/docs/a?x=1;y=%25", "https://example.org/docs/a%20b",
                                 "https://example.org/docs/caf%C3%A9"])
def test_a_query_may_hold_what_a_path_may_not(url: str) -> None:
    assert normalise(url).raw_path.startswith("/docs/")
