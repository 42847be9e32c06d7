"""The watcher API and request hygiene (SPEC §9), against a running in-process service."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Protocol

import aiohttp

from sentinel_hooks.store.shortcuts import last_observation
from tests.service.conftest import Starter

WEBHOOK = """\
id: hook
strategy: webhook
secret: topsecret-value
conditions: [{path: level, op: eq, value: crit}]
deliveryTargets: [console]
"""


class Reachable(Protocol):
    """What ``call`` needs of a service: where it listens (a ``Service``, a `sentinel run` process)."""

    url: str


async def call(
    service: Reachable,
    method: str,
    path: str,
    *,
    body: Any = None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    sent = dict(headers or {})
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, service.url + path, data=data, headers=sent) as response,
    ):
        text = await response.text()
        try:
            return response.status, json.loads(text) if text else None
        except ValueError:
            return response.status, text


def signed(body: bytes, secret: str = "topsecret-value") -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Sentinel-Signature": f"sha256={digest}"}


async def test_ingest_with_good_signature_fires(start_service: Starter) -> None:
    """A signed matching event is accepted and fires; a non-matching one is accepted without firing."""
    service = await start_service(watchers={"h.yaml": WEBHOOK})
    body = b'{"level": "crit"}'
    assert (202, {"accepted": True, "fired": True}) == await call(
        service, "POST", "/hooks/ingest/hook", raw=body, headers=signed(body)
    )
    quiet = b'{"level": "info"}'
    assert (202, {"accepted": True, "fired": False}) == await call(
        service, "POST", "/hooks/ingest/hook", raw=quiet, headers=signed(quiet)
    )


async def test_ingest_with_bad_signature_is_401(start_service: Starter) -> None:
    """A wrong or missing signature is refused and nothing is stored."""
    service = await start_service(watchers={"h.yaml": WEBHOOK})
    body = b'{"level": "crit"}'
    status, answer = await call(
        service, "POST", "/hooks/ingest/hook", raw=body, headers=signed(body, "wrong")
    )
    assert (401, "unauthorized") == (status, answer["error"]["code"])
    assert await last_observation(service.store, "hook") is None


async def test_ingest_unknown_or_wrong_strategy_is_404(start_service: Starter) -> None:
    """Ingest answers 404 for an unknown id (SPEC §3)."""
    service = await start_service(watchers={"h.yaml": WEBHOOK})
    status, answer = await call(service, "POST", "/hooks/ingest/nope", body={})
    assert (404, "not_found") == (status, answer["error"]["code"])


async def test_ingest_oversized_is_413(start_service: Starter) -> None:
    """Ingest bodies are capped at limits.maxResponseBytes."""
    service = await start_service(watchers={"h.yaml": WEBHOOK})
    body = json.dumps({"pad": "x" * 5000}).encode()
    status, _ = await call(service, "POST", "/hooks/ingest/hook", raw=body, headers=signed(body))
    assert 413 == status


async def test_manual_fire_then_dedupe(start_service: Starter) -> None:
    """A manual fire is accepted; the same payload again inside the window is deduped."""
    service = await start_service(watchers={"h.yaml": WEBHOOK}, dedupe=60000)
    status, first = await call(service, "POST", "/api/v1/watchers/hook/fire", body={"payload": {"x": 1}})
    assert (202, "pending") == (status, first["state"])
    status, second = await call(service, "POST", "/api/v1/watchers/hook/fire", body={"payload": {"x": 1}})
    assert (202, "deduped") == (status, second["state"])
    _, shown = await call(service, "GET", "/api/v1/watchers/hook")
    assert 1 == shown["status"]["fires"]


async def test_disable_enable_is_reported(start_service: Starter) -> None:
    """PATCH enabled=false disables (state disabled), true enables again."""
    service = await start_service(watchers={"h.yaml": WEBHOOK})
    status, body = await call(service, "PATCH", "/api/v1/watchers/hook", body={"enabled": False})
    assert (200, "disabled") == (status, body["status"]["state"])
    status, body = await call(service, "PATCH", "/api/v1/watchers/hook", body={"enabled": True})
    assert (200, "ok") == (status, body["status"]["state"])


async def test_create_show_delete_api_watcher(start_service: Starter) -> None:
    """POST creates a watcher (201), GET shows it, DELETE removes it (204)."""
    service = await start_service(watchers={})
    created = {"id": "made", "strategy": "webhook", "deliveryTargets": ["console"]}
    status, body = await call(service, "POST", "/api/v1/watchers", body=created)
    assert (201, "made") == (status, body["watcher"]["id"])
    status, listing = await call(service, "GET", "/api/v1/watchers")
    assert ["made"] == [item["id"] for item in listing["items"]]
    assert (204, None) == await call(service, "DELETE", "/api/v1/watchers/made")
    assert 404 == (await call(service, "GET", "/api/v1/watchers/made"))[0]


async def test_an_api_created_watchers_secret_is_never_shown(start_service: Starter) -> None:
    """An HMAC secret sent through the API (a literal: the API takes no ``${env:}``) is ``***`` in the
    201, in GET and in the listing, and still checks pushes."""
    service = await start_service(watchers={})
    created = {
        "id": "made",
        "strategy": "webhook",
        "secret": "api-literal-secret-42",
        "deliveryTargets": ["console"],
    }
    status, answer = await call(service, "POST", "/api/v1/watchers", body=created)
    shown = await call(service, "GET", "/api/v1/watchers/made")
    listing = await call(service, "GET", "/api/v1/watchers")
    assert (201, "***") == (status, answer["watcher"]["secret"])
    assert (200, "***") == (shown[0], shown[1]["watcher"]["secret"])
    assert "api-literal-secret-42" not in json.dumps([answer, shown, listing])
    body = b'{"level": "crit"}'
    pushed = await call(
        service, "POST", "/hooks/ingest/made", raw=body, headers=signed(body, "api-literal-secret-42")
    )
    assert 202 == pushed[0]


async def test_a_literal_secret_in_a_file_is_never_shown(start_service: Starter) -> None:
    """A file watcher's secret written as a literal (not from the environment) is masked as well."""
    service = await start_service(watchers={"h.yaml": WEBHOOK})
    status, answer = await call(service, "GET", "/api/v1/watchers/hook")
    assert (200, "***") == (status, answer["watcher"]["secret"])
    assert "topsecret-value" not in json.dumps(answer)


async def test_create_invalid_watcher_lists_errors(start_service: Starter) -> None:
    """An invalid watcher is a 400 with every error as {key, message}."""
    service = await start_service(watchers={})
    status, body = await call(
        service,
        "POST",
        "/api/v1/watchers",
        body={"id": "bad", "strategy": "webhook", "matchh": "all", "deliveryTargets": ["nope"]},
    )
    assert 400 == status
    keys = {d["key"] for d in body["error"]["details"]}
    assert {"matchh"} <= keys


async def test_command_watcher_creation_is_forbidden(start_service: Starter) -> None:
    """Command watchers cannot be created through the API by default (403)."""
    service = await start_service(watchers={})
    status, _ = await call(
        service,
        "POST",
        "/api/v1/watchers",
        body={"id": "cmd", "strategy": "command", "command": ["true"], "intervalMs": 1000},
    )
    assert 403 == status


async def test_deleting_a_file_watcher_is_a_conflict(start_service: Starter) -> None:
    """A file-defined watcher is removed by editing its file (409 says so)."""
    service = await start_service(watchers={"h.yaml": WEBHOOK})
    status, body = await call(service, "DELETE", "/api/v1/watchers/hook")
    assert 409 == status
    assert "watchers/h.yaml" in body["error"]["message"]


async def test_post_without_json_content_type_is_415(start_service: Starter) -> None:
    """A form post cannot reach the API."""
    service = await start_service(watchers={"h.yaml": WEBHOOK})
    status, _ = await call(
        service,
        "POST",
        "/api/v1/watchers/hook/fire",
        raw=b"a=1",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert 415 == status


async def test_duplicate_keys_deep_nesting_and_long_numbers_are_400(start_service: Starter) -> None:
    """JSON with duplicate keys, nesting over 100, or numbers over 4300 digits is refused."""
    service = await start_service(watchers={"h.yaml": WEBHOOK})
    headers = {"Content-Type": "application/json"}
    for raw in (
        b'{"payload": 1, "payload": 2}',
        b'{"payload": ' + b"[" * 150 + b"]" * 150 + b"}",
        b'{"payload": ' + b"9" * 5000 + b"}",
    ):
        status, body = await call(service, "POST", "/api/v1/watchers/hook/fire", raw=raw, headers=headers)
        assert (400, "invalid_json") == (status, body["error"]["code"])


async def test_foreign_host_is_421_without_token(start_service: Starter) -> None:
    """Without apiToken only loopback Host headers are answered."""
    service = await start_service(watchers={})
    status, body = await call(service, "GET", "/api/v1/watchers", headers={"Host": "evil.example.com"})
    assert (421, "misdirected_request") == (status, body["error"]["code"])


async def test_token_is_required_when_set(start_service: Starter) -> None:
    """With apiToken, /api needs the bearer token (any Host); health stays open."""
    service = await start_service(
        watchers={}, server="{host: 127.0.0.1, port: 0, apiToken: tok-abcdef-0123456}"
    )
    assert 200 == (await call(service, "GET", "/healthz"))[0]
    status, body = await call(service, "GET", "/api/v1/watchers")
    assert (401, "unauthorized") == (status, body["error"]["code"])
    wrong = {"Authorization": "Bearer nope"}
    assert 401 == (await call(service, "GET", "/api/v1/watchers", headers=wrong))[0]
    good = {"Authorization": "Bearer tok-abcdef-0123456", "Host": "sentinel.internal"}
    assert 200 == (await call(service, "GET", "/api/v1/watchers", headers=good))[0]


async def test_unknown_route_is_json_404(start_service: Starter) -> None:
    """Errors are JSON, even for routes that do not exist."""
    service = await start_service(watchers={})
    status, body = await call(service, "GET", "/api/v1/nothing")
    assert (404, "not_found") == (status, body["error"]["code"])
