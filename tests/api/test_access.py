"""Who may call the API: the loopback Host rule without a token, the bearer token with one (SPEC §9)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from sentinel_hooks.service import Service
from sentinel_hooks.store.shortcuts import last_observation
from tests.api.raw_http import raw_status
from tests.cli.conftest import sentinel_command
from tests.service.conftest import Starter
from tests.service.test_api import call

WEBHOOK = """\
id: hook
strategy: webhook
conditions: [{path: level, op: eq, value: crit}]
deliveryTargets: [console]
"""
TOKEN = "tok-0123456789abcdef"
WITH_TOKEN = f"{{host: 127.0.0.1, port: 0, apiToken: {TOKEN}}}"

LOOPBACK_HOSTS = [
    "localhost",
    "localhost:8765",
    "LocalHost:1",
    "127.0.0.1",
    "127.0.0.1:8765",
    "127.255.0.7:80",
    "[::1]",
    "[::1]:8765",
]
FOREIGN_HOSTS = [
    "127.attacker.example",
    "127.attacker.example:8765",
    "127.0.0.1.nip.io",
    "127.0.0.1.nip.io:8765",
    "foo.localhost",
    "localhost.localdomain",
    "localhost.",
    "127.0.0.1.",
    "127.1",
    "2130706433",
    "0x7f.0.0.1",
    "127.000.000.001",
    "::1",
    "[::1",
    "[::ffff:127.0.0.1]",
    "localhost:",
    "localhost:http",
    "localhost:99999",
    "localhost:80:80",
    "evil.example",
    "",
]
ROUTES = [
    ("GET", "/"),
    ("GET", "/static/app.js"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/api/v1/watchers"),
    ("GET", "/api/v1/openapi.json"),
    ("POST", "/api/v1/inbox/nope/ack"),
]


@pytest.fixture
async def service(start_service: Starter) -> Service:
    """A service without apiToken, with one webhook watcher."""
    return await start_service(watchers={"hook.yaml": WEBHOOK})


@pytest.mark.parametrize("host", LOOPBACK_HOSTS)
async def test_loopback_hosts_are_answered(service: Service, host: str) -> None:
    """localhost, 127.0.0.0/8 addresses and [::1], with or without a port, pass the Host rule."""
    assert 200 == (await call(service, "GET", "/api/v1/watchers", headers={"Host": host}))[0]


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
async def test_other_hosts_are_421(service: Service, host: str) -> None:
    """Names that only look loopback (a rebinding page's), and anything else, are refused."""
    status, body = await call(service, "GET", "/api/v1/watchers", headers={"Host": host})
    assert (421, "misdirected_request") == (status, body["error"]["code"])


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_the_host_rule_covers_every_route(service: Service, method: str, path: str) -> None:
    """A rebinding page gets 421 on every route, health and the web page included."""
    status, _ = await call(service, method, path, headers={"Host": "127.attacker.example"})
    assert 421 == status


async def test_a_rebinding_page_cannot_fire(service: Service) -> None:
    """A fire and an ingest through a look-alike Host are refused and store nothing."""
    foreign = {"Host": "127.0.0.1.nip.io"}
    fire = await call(service, "POST", "/api/v1/watchers/hook/fire", body={}, headers=foreign)
    ingest = await call(service, "POST", "/hooks/ingest/hook", body={"level": "crit"}, headers=foreign)
    assert (421, 421) == (fire[0], ingest[0])
    assert [] == (await service.store.list_contracts(limit=10)).items
    assert await last_observation(service.store, "hook") is None


async def test_the_page_host_is_answered(service: Service) -> None:
    """What a browser sends for the page opened at service.url: Host 127.0.0.1:port."""
    host = service.url.removeprefix("http://")
    assert 200 == (await call(service, "GET", "/", headers={"Host": host}))[0]


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
async def test_the_cli_is_answered(service: Service, name: str) -> None:
    """`sentinel watchers list --url http://NAME:PORT` (a real subprocess) gets through the Host rule."""
    url = service.url.replace("127.0.0.1", name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    process = await asyncio.create_subprocess_exec(
        *sentinel_command(),
        "watchers",
        "list",
        "--url",
        url,
        "--json",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
    assert (0, ["hook"]) == (process.returncode, [w["id"] for w in json.loads(stdout)["items"]]), stderr


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
async def test_the_bearer_scheme_is_case_insensitive(start_service: Starter, scheme: str) -> None:
    """RFC 7235: the auth scheme is case-insensitive, so every spelling of Bearer works."""
    service = await start_service(watchers={}, server=WITH_TOKEN)
    headers = {"Authorization": f"{scheme} {TOKEN}"}
    assert 200 == (await call(service, "GET", "/api/v1/watchers", headers=headers))[0]


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/api/v1/watchers", {"Authorization": TOKEN}),
        ("/api/v1/watchers", {"Authorization": "Bearer"}),
        ("/api/v1/watchers", {"Authorization": f"Bearer {TOKEN}x"}),
        ("/api/v1/watchers", {"Authorization": f"Bearer {TOKEN.upper()}"}),
        ("/api/v1/watchers", {"Authorization": f"Basic {TOKEN}"}),
        ("/api/v1/watchers", {"Authorization": f"Token {TOKEN}"}),
        ("/api/v1/watchers", {"Authorization": f"Bearer {TOKEN} extra"}),
        ("/api/v1/watchers", {"Authorization": "Bearer é"}),
        ("/api/v1/watchers", {"X-Api-Token": TOKEN}),
        ("/api/v1/watchers", {"X-Sentinel-Token": TOKEN}),
        (f"/api/v1/watchers?token={TOKEN}", {}),
        (f"/api/v1/watchers?access_token={TOKEN}", {}),
        (f"/api/v1/watchers?apiToken={TOKEN}", {}),
    ],
)
async def test_only_the_authorization_header_carries_the_token(
    start_service: Starter, path: str, headers: dict[str, str]
) -> None:
    """A wrong token, another scheme, another header or a query string is 401."""
    service = await start_service(watchers={}, server=WITH_TOKEN)
    status, body = await call(service, "GET", path, headers=headers)
    assert (401, "unauthorized") == (status, body["error"]["code"])


async def test_a_token_that_is_not_utf8_is_401(start_service: Starter) -> None:
    """Header bytes that are not UTF-8 are a wrong token (401), never a 500."""
    service = await start_service(watchers={}, server=WITH_TOKEN)
    request = b"GET /api/v1/watchers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\r\n\r\n"
    assert 401 == await raw_status(service, request)


TOKEN_ROUTES = [
    (b"GET", b"/api/v1/watchers"),
    (b"GET", b"/api/v1/status"),
    (b"POST", b"/hooks/sentinel"),
    (b"POST", b"/mcp"),
]


def with_authorization(method: bytes, path: bytes, authorization: bytes) -> bytes:
    """A raw request to ``path`` carrying ``authorization`` byte for byte (POSTs with a ``{}`` body)."""
    head = method + b" " + path + b" HTTP/1.1\r\nHost: x\r\nAuthorization: " + authorization + b"\r\n"
    if method == b"POST":
        head += b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        head += b"Content-Length: 2\r\n"
    return head + b"Connection: close\r\n\r\n" + (b"{}" if method == b"POST" else b"")


@pytest.mark.parametrize(("method", "path"), TOKEN_ROUTES)
@pytest.mark.parametrize("added", [b"\xc2\xa0", b"\xe3\x80\x80", b"\xe2\x80\x83", b"\xc2\x85"])
async def test_a_token_with_unicode_space_around_it_is_401(
    start_service: Starter, method: bytes, path: bytes, added: bytes
) -> None:
    """The token is compared exactly: followed (or preceded) by a non-breaking, ideographic or em
    space or a NEL, which ``str.strip`` would drop, it is another token, on every route that takes it."""
    service = await start_service(watchers={}, server=WITH_TOKEN)
    token = TOKEN.encode()
    exact = await raw_status(service, with_authorization(method, path, b"Bearer " + token))
    after = await raw_status(service, with_authorization(method, path, b"Bearer " + token + added))
    before = await raw_status(service, with_authorization(method, path, b"Bearer " + added + token))
    assert (True, 401, 401) == (exact != 401, after, before)
