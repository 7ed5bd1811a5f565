"""Which addresses ``fetch`` may connect to (pure): a public unicast address, judged after unwrapping any
IPv4 address an IPv6 form carries (notes part 3a). ``address_allowed`` says why not, in words."""

from __future__ import annotations

import ipaddress

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _nets(*pairs: tuple[str, str]) -> tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...]:
    return tuple((ipaddress.ip_network(net), why) for net, why in pairs)


# Named first so a refusal says what the address is; `not is_global` catches the rest. The cloud
# metadata services come before the ranges that hold them, for the plainer message.
DENIED = _nets(
    ("169.254.169.254/32", "the cloud metadata service"),
    ("100.100.100.200/32", "the cloud metadata service"),
    ("fd00:ec2::254/128", "the cloud metadata service"),
    ("0.0.0.0/8", "an unspecified address"),
    ("10.0.0.0/8", "a private address"),
    ("100.64.0.0/10", "a shared (carrier-grade NAT) address"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.0.0/16", "a link-local address"),
    ("172.16.0.0/12", "a private address"),
    ("192.0.0.0/24", "a reserved protocol address"),
    ("192.0.2.0/24", "a documentation address"),
    ("192.88.99.0/24", "a 6to4 relay address"),
    ("192.168.0.0/16", "a private address"),
    ("198.18.0.0/15", "a benchmarking address"),
    ("198.51.100.0/24", "a documentation address"),
    ("203.0.113.0/24", "a documentation address"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved address"),
    ("::/128", "an unspecified address"),
    ("::1/128", "a loopback address"),
    ("::/96", "an IPv4-compatible address (deprecated)"),
    ("::ffff:0:0/96", "an IPv4-mapped address"),
    ("::ffff:0:0:0/96", "an IPv4-translated address"),
    ("64:ff9b::/96", "a NAT64 address"),
    ("64:ff9b:1::/48", "a NAT64 address"),
    ("100::/64", "a discard address"),
    ("2001::/32", "a Teredo address"),
    ("2001:db8::/32", "a documentation address"),
    ("2002::/16", "a 6to4 address"),
    ("fc00::/7", "a unique-local (private) address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address"),
    ("ff00::/8", "a multicast address"),
)


def _embedded(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 form carries (mapped, 6to4, Teredo's client, NAT64), if any."""
    if address.ipv4_mapped is not None:
        return "IPv4-mapped", address.ipv4_mapped
    if address.sixtofour is not None:
        return "6to4", address.sixtofour
    if address.teredo is not None:
        return "Teredo", address.teredo[1]
    if address in _NAT64:
        return "NAT64", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _TRANSLATED:  # SIIT's ::ffff:0:a.b.c.d, which `ipaddress` does not unwrap
        return "IPv4-translated", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
# Every public IPv6 address IANA has handed out is in 2000::/3; the rest of the space is reserved or
# special-purpose, whatever a given Python's `is_global` says about it.
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")


def address_allowed(ip: str | Address) -> str | None:
    """None if ``ip`` is a public address ``fetch`` may connect to; else why not, in words.

    An IPv6 form carrying an IPv4 address (mapped, 6to4, Teredo, NAT64) is judged by what it
    carries first, and refused anyway: the tunnelled forms reach a v4 host through a relay, and
    ``ipaddress`` has changed its mind about them between patch releases."""
    try:
        address = ipaddress.ip_address(ip) if isinstance(ip, str) else ip
    except ValueError:
        return f"{ip!r} is not an IP address"
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            address = ipaddress.IPv6Address(str(address).partition("%")[0])
        inner = _embedded(address)
        if inner is not None:
            form, v4 = inner
            why = address_allowed(v4)
            if why is not None:
                return f"{address} is the {form} form of {v4}, {why}"
            article = "an" if form[0] in "AEIOU" else "a"
            return f"{address} is {article} {form} address (of {v4}); ask for a plain public address"
    for network, why in DENIED:
        if address.version == network.version and address in network:
            return f"{address} is {why}"
    if isinstance(address, ipaddress.IPv6Address) and address not in _GLOBAL_UNICAST:
        return f"{address} is outside the global unicast range (2000::/3)"
    if not address.is_global:
        return f"{address} is not a public address"
    return None


def plain_loopback(ip: str) -> bool:
    """127.0.0.0/8 or ::1 as written — what a loopback test server listens on, nothing dressed up."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return False
    return address.is_loopback and not (isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped)
