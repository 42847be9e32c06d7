"""Which hosts watchers and targets may reach: the ``allowedHosts`` list (SPEC.md §2.1).

Pure: no DNS here. Entries are hostnames (exact, case-insensitive), ``*.suffix`` wildcards
(any name below the suffix, not the suffix itself), IP literals or CIDR networks. Addresses
are compared after normalising (IPv4-mapped IPv6 becomes IPv4). A hostname entry never
unlocks a private address; the connection-time check (safe HTTP) applies that rule.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.lru_cache(maxsize=4096)  # every watcher's host is checked at load: ipaddress is slow
def normalise_ip(text: str) -> IPAddress | None:
    """The address ``text`` denotes (brackets and IPv4-mapped IPv6 unwrapped), or None."""
    candidate = text.strip().strip("[]")
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@functools.lru_cache(maxsize=1024)
def _network(entry: str) -> IPNetwork | None:
    if "/" not in entry:
        return None
    try:
        return ipaddress.ip_network(entry.strip(), strict=False)
    except ValueError:
        return None


def listed_address(address: IPAddress, allowed: Iterable[str]) -> bool:
    """Whether ``address`` itself is listed (as a literal or inside a listed CIDR)."""
    for entry in allowed:
        literal = normalise_ip(entry)
        if literal is not None and literal == address:
            return True
        network = _network(entry)
        if network is not None and address.version == network.version and address in network:
            return True
    return False


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """Whether ``host`` (a name or an IP literal from a URL) matches an allowedHosts entry."""
    entries = list(allowed)
    address = normalise_ip(host)
    if address is not None:
        return listed_address(address, entries)
    name = host.strip().rstrip(".").lower()
    for entry in entries:
        pattern = entry.strip().rstrip(".").lower()
        if pattern.startswith("*."):
            if name.endswith(pattern[1:]) and len(name) > len(pattern) - 1:
                return True
        elif name == pattern:
            return True
    return False


def url_host(url: str) -> str | None:
    """The host of ``url`` (without brackets), or None when it has none."""
    origin = url_origin(url)
    if origin is not None:
        return _origin_host(origin)
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


_URL_ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://[^/?#\s\\]+(?=[/?#]|\Z)")


def url_origin(url: str) -> str | None:
    """``scheme://host[:port]`` when ``url`` plainly starts with it, else None.

    Plainly: a lower-case scheme, then a host part ended by ``/``, ``?``, ``#`` or the end, with
    no space or backslash in it (which ``urlsplit`` would strip or read otherwise). ``urlsplit``
    then reads the same scheme and host from the origin as from the whole URL, so what is found
    from one origin holds for every URL that starts with it: thousands of watchers share a few
    origins, and splitting each URL costs a tenth of validating a watcher.
    """
    found = _URL_ORIGIN.match(url)
    return None if found is None else found.group()


@functools.lru_cache(maxsize=1024)
def _origin_host(origin: str) -> str | None:
    try:
        return urlsplit(origin).hostname
    except ValueError:
        return None
