"""The private-address rule: odd literal forms, resolved addresses, DNS rebinding (SPEC §2.1)."""

from __future__ import annotations

import ipaddress

import pytest
from aiohttp import web

from sentinel_hooks.net.errors import ConnectionFailed, HostNotAllowed, NetError, PrivateAddressRefused
from sentinel_hooks.net.policy import HostPolicy, address_category, legacy_ipv4
from sentinel_hooks.net.resolver import CheckingResolver
from tests.net.servers import OpenHttp, ScriptedResolver, Serve, app_with

PUBLIC = "93.184.216.34"


def counting_app(hits: list[str]) -> web.Application:
    async def counted(request: web.Request) -> web.Response:
        hits.append(request.host)
        return web.Response(text="reached")

    return app_with("/", counted)


@pytest.mark.parametrize(
    ("host", "listed", "expected"),
    [
        ("127.1", "127.1", HostNotAllowed),
        ("2130706433", "2130706433", HostNotAllowed),
        ("0x7f000001", "0x7f000001", HostNotAllowed),
        ("017700000001", "017700000001", HostNotAllowed),
        ("0", "0", HostNotAllowed),
        ("[::ffff:127.0.0.1]", "localhost", HostNotAllowed),
        ("[::ffff:127.0.0.1]", "::ffff:0:0/96", HostNotAllowed),
        ("[::1]", "localhost", HostNotAllowed),
        ("0.0.0.0", "localhost", HostNotAllowed),
        ("localhost.", "localhost", (PrivateAddressRefused, ConnectionFailed)),
        ("LOCALHOST", "localhost", PrivateAddressRefused),
    ],
)
async def test_odd_loopback_forms_never_connect(
    serve: Serve, open_http: OpenHttp, host: str, listed: str, expected: type[NetError]
) -> None:
    """Each odd way of writing loopback is refused (or fails to resolve); the server is never reached."""
    hits: list[str] = []
    server = await serve(counting_app(hits))
    http = await open_http(allowed_hosts=[listed, "*.example.com"])
    with pytest.raises(expected):
        await http.request("GET", f"http://{host}:{server.port}/")
    assert [] == hits


async def test_mapped_ipv6_matches_listed_ipv4(serve: Serve, open_http: OpenHttp) -> None:
    """[::ffff:127.0.0.1] is compared as 127.0.0.1: listing 127.0.0.1 allows it (normalised, not bypassed)."""
    hits: list[str] = []
    server = await serve(counting_app(hits))
    http = await open_http(allowed_hosts=["127.0.0.1"])
    response = await http.request("GET", f"http://[::ffff:127.0.0.1]:{server.port}/")
    assert (200, 1) == (response.status, len(hits))


async def test_name_resolving_to_loopback_is_refused(serve: Serve, open_http: OpenHttp) -> None:
    """A listed name whose DNS answer is loopback is refused inside the resolver."""
    hits: list[str] = []
    server = await serve(counting_app(hits))
    http = await open_http(allowed_hosts=["svc.test"], resolver=ScriptedResolver(["127.0.0.1"]))
    with pytest.raises(PrivateAddressRefused, match=r"'svc.test' resolves to 127.0.0.1 \(loopback\)"):
        await http.request("GET", f"http://svc.test:{server.port}/")
    assert [] == hits


async def test_one_private_answer_refuses_the_whole_name(serve: Serve, open_http: OpenHttp) -> None:
    """A public and a private address for one name: the name is refused, not half-used."""
    hits: list[str] = []
    server = await serve(counting_app(hits))
    http = await open_http(allowed_hosts=["mixed.test"], resolver=ScriptedResolver([PUBLIC, "127.0.0.1"]))
    with pytest.raises(PrivateAddressRefused, match="the whole name is refused"):
        await http.request("GET", f"http://mixed.test:{server.port}/")
    assert [] == hits


async def test_mapped_private_answer_is_refused(open_http: OpenHttp) -> None:
    """An IPv4-mapped IPv6 answer is normalised before the check (::ffff:10.0.0.1 is private)."""
    http = await open_http(allowed_hosts=["mapped.test"], resolver=ScriptedResolver(["::ffff:10.0.0.1"]))
    with pytest.raises(PrivateAddressRefused, match=r"resolves to 10.0.0.1 \(private\)"):
        await http.request("GET", "http://mapped.test/")


async def test_rebinding_answer_is_refused_on_the_next_lookup() -> None:
    """DNS rebinding: the first lookup is public, the second private; the second is refused at lookup."""
    resolver = CheckingResolver(HostPolicy(("rebind.test",)), ScriptedResolver([PUBLIC], ["127.0.0.1"]))
    first = await resolver.resolve("rebind.test", 80)
    with pytest.raises(PrivateAddressRefused):
        await resolver.resolve("rebind.test", 80)
    assert [PUBLIC] == [answer["host"] for answer in first]


async def test_connection_goes_to_the_checked_address(serve: Serve, open_http: OpenHttp) -> None:
    """The connector connects to what the checking resolver returned (allowed here)."""
    hits: list[str] = []
    server = await serve(counting_app(hits))
    http = await open_http(
        allowed_hosts=["svc.test"], allow_private_networks=True, resolver=ScriptedResolver(["127.0.0.1"])
    )
    response = await http.request("GET", f"http://svc.test:{server.port}/")
    assert (200, [f"svc.test:{server.port}"]) == (response.status, hits)


async def test_listed_address_unlocks_a_resolved_name(serve: Serve, open_http: OpenHttp) -> None:
    """A name resolving to 127.0.0.1 is allowed when that address itself is listed."""
    server = await serve(counting_app([]))
    http = await open_http(allowed_hosts=["svc.test", "127.0.0.1"], resolver=ScriptedResolver(["127.0.0.1"]))
    assert 200 == (await http.request("GET", f"http://svc.test:{server.port}/")).status


@pytest.mark.parametrize(
    ("address", "category"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("0.1.2.3", "private"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("100.64.0.1", "shared (carrier-grade NAT)"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("fc00::1", "private"),
        ("fec0::1", "site-local"),
        ("240.0.0.1", "private"),
        ("::ffff:192.168.0.1", "private"),
        ("2002:7f00:1::", "loopback (embedded IPv4 127.0.0.1)"),
        ("64:ff9b::a00:1", "private (embedded IPv4 10.0.0.1)"),
        ("::7f00:1", "reserved"),
        ("8.8.8.8", None),
        ("2606:4700::1111", None),
        ("64:ff9b::808:808", None),
    ],
)
def test_address_category(address: str, category: str | None) -> None:
    """Each non-public address is named for the message; public ones pass."""
    assert category == address_category(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    ("host", "meaning"),
    [("127.1", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("3232235777", "192.168.1.1"), ("127.0.0.1", None)],
)
def test_legacy_ipv4_forms(host: str, meaning: str | None) -> None:
    """Legacy IPv4 spellings are recognised (canonical dotted quads and names are not legacy)."""
    assert meaning == legacy_ipv4(host)


def test_legacy_form_message_names_the_address() -> None:
    """The refusal says which address the odd form stands for."""
    with pytest.raises(
        HostNotAllowed, match=r"'2130706433' is a legacy form of the IPv4 address 127\.0\.0\.1"
    ):
        HostPolicy(("2130706433",)).check_url("http://2130706433/")


def test_idn_host_matches_unicode_entry() -> None:
    """A punycode host matches an allowedHosts entry written in Unicode."""
    assert (
        "xn--bcher-kva.example"
        == HostPolicy(("bücher.example",)).check_url("https://bücher.example/").raw_host
    )
