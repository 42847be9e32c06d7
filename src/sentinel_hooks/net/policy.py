"""Where outbound requests may go (SPEC.md §2.1), decided before any byte is sent.

Two gates. The URL's host must match ``allowedHosts`` (``config.hosts``). Then every
address the host *is* (an IP literal) or *resolves to* (checked by ``net.resolver`` inside
the connector, so the addresses checked are the ones connected to) must be public, unless
``allowPrivateNetworks`` is true or that address itself is listed as a literal or inside a
listed CIDR. A listed hostname never unlocks a private address. IPv4 written in legacy
forms (``127.1``, ``2130706433``, ``0x7f000001``, ``017700000001``) is refused outright:
such hosts mean different things to different parsers.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from yarl import URL

from sentinel_hooks.config.hosts import IPAddress, host_allowed, listed_address, normalise_ip
from sentinel_hooks.net.errors import HostNotAllowed, InvalidUrl, PrivateAddressRefused

HTTP_SCHEMES = ("http", "https")
WS_SCHEMES = ("ws", "wss")
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_UNLOCK_HINT = "set allowPrivateNetworks: true, or list the address itself in allowedHosts"


def address_category(address: IPAddress) -> str | None:
    """Why ``address`` is refused by default (``"loopback"``, ``"private"`` …), or None if public."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        elif address in _NAT64 or address.sixtofour is not None:
            embedded = address.sixtofour or ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
            inner = address_category(embedded)
            return None if inner is None else f"{inner} (embedded IPv4 {embedded})"
    checks = (
        (address.is_unspecified, "unspecified"),
        (address.is_loopback, "loopback"),
        (address.is_link_local, "link-local"),
        (address.is_multicast, "multicast"),
        (isinstance(address, ipaddress.IPv6Address) and address.is_site_local, "site-local"),
        (isinstance(address, ipaddress.IPv4Address) and address in _SHARED, "shared (carrier-grade NAT)"),
        (address.is_private, "private"),
        (address.is_reserved, "reserved"),
        (not address.is_global, "not globally routable"),
    )
    return next((name for refused, name in checks if refused), None)


def legacy_ipv4(host: str) -> str | None:
    """The dotted-quad address a legacy IPv4 form such as ``127.1`` denotes, else None."""
    if ":" in host or normalise_ip(host) is not None:
        return None
    try:
        packed = socket.inet_aton(host)
    except OSError:
        return None
    return str(ipaddress.IPv4Address(packed))


def parse_url(url: str) -> URL:
    """``url`` parsed, or ``InvalidUrl`` saying why it cannot be."""
    try:
        return URL(url)
    except (TypeError, ValueError) as exc:
        raise InvalidUrl(f"not a valid URL ({exc})") from exc


def _unicode_name(host: str) -> str:
    """``host`` with punycode labels decoded (allowedHosts may list either form)."""
    if "xn--" not in host.lower():
        return host
    try:
        return host.encode("ascii").decode("idna")
    except UnicodeError:
        return host


@dataclass(frozen=True)
class HostPolicy:
    """The allowlist and private-address rule of one Sentinel configuration."""

    allowed_hosts: tuple[str, ...]
    allow_private_networks: bool = False

    def check_url(self, url: str, schemes: tuple[str, ...] = HTTP_SCHEMES) -> URL:
        """``url`` parsed, when its scheme, host and (for literals) address are allowed."""
        parsed = parse_url(url)
        self.check_parsed(parsed, schemes)
        return parsed

    def check_parsed(self, parsed: URL, schemes: tuple[str, ...] = HTTP_SCHEMES) -> None:
        """``check_url`` of a URL already parsed: a pure function of its scheme and host."""
        if parsed.scheme not in schemes:
            wanted = " or ".join(f"{s}://" for s in schemes)
            raise InvalidUrl(f"scheme {parsed.scheme!r} is not supported here (use {wanted})")
        host = parsed.raw_host
        if not host:
            raise InvalidUrl("the URL has no host")
        self.check_host(host, decoded=parsed.host)

    def check_host(self, host: str, *, decoded: str | None = None) -> None:
        """Refuse ``host`` unless allowedHosts lists it; an IP literal must also pass the address rule."""
        legacy = legacy_ipv4(host)
        if legacy is not None:
            raise HostNotAllowed(
                f"host {host!r} is a legacy form of the IPv4 address {legacy}; "
                f"write {legacy} (Sentinel refuses non-canonical IP literals)"
            )
        if host.replace(".", "").isdigit() and normalise_ip(host) is None:
            raise InvalidUrl(f"host {host!r} is not a valid IPv4 address")
        names = {host, decoded or _unicode_name(host)}
        if not any(host_allowed(name, self.allowed_hosts) for name in names):
            raise HostNotAllowed(f"host {host!r} is not in allowedHosts (add it there in sentinel.yaml)")
        address = normalise_ip(host)
        if address is not None:
            self.check_address(address)

    def address_refusal(self, address: IPAddress) -> str | None:
        """Why connecting to ``address`` is refused under this policy, or None when allowed."""
        if self.allow_private_networks or listed_address(address, self.allowed_hosts):
            return None
        return address_category(address)

    def check_address(self, address: IPAddress) -> None:
        """Refuse an IP-literal host whose address is not allowed."""
        category = self.address_refusal(address)
        if category is not None:
            raise PrivateAddressRefused(f"address {address} is {category}; refused ({_UNLOCK_HINT})")

    def check_resolved(self, host: str, addresses: Iterable[str]) -> None:
        """Refuse ``host`` when ANY address it resolved to is not allowed (no partial answers)."""
        for text in addresses:
            address = normalise_ip(text)
            if address is None:
                raise PrivateAddressRefused(f"host {host!r} resolved to {text!r}, which is not an IP address")
            category = self.address_refusal(address)
            if category is not None:
                raise PrivateAddressRefused(
                    f"host {host!r} resolves to {address} ({category}); the whole name is refused "
                    f"(a listed hostname never unlocks private addresses: {_UNLOCK_HINT})"
                )
